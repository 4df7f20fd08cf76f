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
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str


def _parse_event(raw: bytes) -> SSEEvent | None:
    event: str | None = None
    data: list[str] = []
    for raw_line in _LINE_END.split(raw):
        line = raw_line.decode("utf-8", errors="replace")
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
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
        self._buf += chunk
        events: list[SSEEvent] = []
        while True:
            m = _EVENT_END.search(self._buf)
            if m is None:
                return events
            raw, self._buf = self._buf[: m.start()], self._buf[m.end() :]
            ev = _parse_event(raw)
            if ev is not None:
                events.append(ev)

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
