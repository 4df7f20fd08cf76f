"""SSE lines end at CR, LF or CRLF and nowhere else, so no text in an answer can split an
event (and lose it, with the usage or the stop event it carried)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.protocols.sse import iter_events

#: U+2028, U+0085, U+2029, VT, FF, FS: all line breaks to ``str.splitlines``, none to SSE.
ODD_TEXT = "line\u2028sep\u0085nel\u2029para\x0bvt\x0cff\x1cfs"


def stream(events: list[tuple[str | None, Any]], end: str) -> list[bytes]:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        head = f"event: {name}{end}" if name else ""
        out.append(f"{head}data: {text}{end}{end}".encode())
    return out


def run(adapter: ProtocolAdapter, chunks: list[bytes]) -> AssembledMessage:
    msg = assemble(adapter, chunks, streamed=True)
    assert msg is not None
    return msg


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_unicode_line_separators_in_text_survive_assembly(end: str) -> None:
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": ODD_TEXT}
    anthropic_events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {"id": "m1"}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_stop", {"type": "message_stop"}),
    ]
    msg = run(ANTHROPIC, stream(anthropic_events, end))
    assert msg.text == ODD_TEXT and msg.complete
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": ODD_TEXT}}]}
    chat = run(OPENAI_CHAT, stream([(None, chunk), (None, "[DONE]")], end))
    assert chat.text == ODD_TEXT and chat.complete
    text_delta = {"type": "response.output_text.delta", "delta": ODD_TEXT}
    responses = run(OPENAI_RESPONSES, stream([("response.output_text.delta", text_delta)], end))
    assert responses.text == ODD_TEXT


def test_mixed_line_ends_still_end_events() -> None:
    raw = b"event: a\ndata: 1\r\n\r\nevent: b\r\ndata: 2\n\r\nevent: c\rdata: 3\r\rdata: 4\n\n"
    assert [(e.event, e.data) for e in iter_events([raw])] == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        (None, "4"),
    ]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    raw = b"event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n"
    for cut in range(1, len(raw)):
        got = [(e.event, e.data) for e in iter_events([raw[:cut], raw[cut:]])]
        assert got == [("a", "1"), (None, "2")], cut


def _reference(raw: bytes) -> list[tuple[str | None, str]]:
    """The SSE rules read the slowest way: the whole stream at once, an event per blank line,
    each line decoded on its own."""
    out: list[tuple[str | None, str]] = []
    for block in re.split(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)", raw):
        event, data = None, []
        for bline in re.split(rb"\r\n|\r|\n", block):
            line = bline.decode("utf-8", errors="replace")
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        if event is not None or data:
            out.append((event, "\n".join(data)))
    return out


_PIECES = st.sampled_from(
    [
        b"event: a",
        b'data: {"x": 1}',
        b"data:2",
        b": note",
        b"id: 7",
        b"\n",
        b"\r",
        b"\r\n",
        "é€\u2028".encode(),
        b"\xe2\x82",
        b"\xff",
        b"data: ",
        b" ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_events_are_the_same_however_the_stream_is_cut(
    pieces: list[bytes], cuts: list[int]
) -> None:
    """Chunks may end anywhere (inside a CRLF, inside a UTF-8 sequence): the events are the
    ones the whole stream holds, read line by line, in order."""
    raw = b"".join(pieces)
    bounds = sorted({min(c, len(raw)) for c in cuts} | {0, len(raw)})
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    got = [(e.event, e.data) for e in iter_events(chunks)]
    assert got == _reference(raw)
