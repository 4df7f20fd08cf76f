"""Incremental Server-Sent Events parsing.

Chunks arrive split anywhere (inside a line, inside a UTF-8 sequence); ``SSEParser`` buffers
bytes until an event is complete and never loses or reorders an event. Comment lines (``:``) and
``retry``/``id`` fields are ignored; multiple ``data:`` lines are joined with newlines as the
SSE specification says.

A line ends at CR, LF or CRLF and nowhere else. ``str.splitlines`` would also split at U+2028,
U+0085 and other Unicode breaks, which JSON carries raw inside strings: an answer quoting such
text would lose the event that holds it (and with it the final usage or the stop event).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Two line ends in a row end an event; a CR followed by LF is one line end, not two.
_EVENT_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str


def _parse_event(raw: bytes) -> SSEEvent | None:
    """An event's fields from its bytes, decoded once: a line end is one ASCII byte, never
    inside a UTF-8 sequence, so decoding the event whole reads each line (and each
    malformed byte's replacement) exactly as decoding it line by line did."""
    text = raw.decode("utf-8", errors="replace")
    event: str | None = None
    data: list[str] = []
    for line in _LINE_END.split(text) if "\r" in text else text.split("\n"):
        if not line or line[0] == ":":
            continue
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if event is None and not data:
        return None
    return SSEEvent(event, "\n".join(data))


class SSEParser:
    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events ``chunk`` completes. The buffer is cut once per chunk, not once per
        event: an answer that arrives in one chunk was copied again for each of its events."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            raws, start = [], 0
            for m in _EVENT_END.finditer(buf):
                raws.append(buf[start : m.start()])
                start = m.end()
            self._buf = buf[start:]
        else:  # LF only, as every provider sends: the same cuts, without the regex's scan
            *raws, self._buf = buf.split(b"\n\n")
        return [ev for ev in map(_parse_event, raws) if ev is not None]

    def close(self) -> list[SSEEvent]:
        """Events left in the buffer when the stream ended without a final blank line."""
        raw, self._buf = self._buf, b""
        ev = _parse_event(raw) if raw.strip() else None
        return [ev] if ev is not None else []


def iter_events(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    parser = SSEParser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()


class RawEvents:
    """A stream cut into whole events, each with its raw bytes (a relay that must hold back
    some events and pass the others on as they were). Same cuts as ``SSEParser``."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[tuple[bytes, SSEEvent]]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            raws, start = [], 0
            for m in _EVENT_END.finditer(buf):
                raws.append(buf[start : m.start()])
                start = m.end()
            self._buf = buf[start:]
        else:
            *raws, self._buf = buf.split(b"\n\n")
        return [(raw, ev) for raw in raws if (ev := _parse_event(raw)) is not None]

    def close(self) -> list[tuple[bytes, SSEEvent]]:
        raw, self._buf = self._buf, b""
        ev = _parse_event(raw) if raw.strip() else None
        return [(raw, ev)] if ev is not None else []
