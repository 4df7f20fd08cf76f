from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.protocols import ANTHROPIC, edits
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.sse import SSEParser

CLAUDE_CODE_TURN = {
    "model": "claude-sonnet-4-5-20250929",
    "max_tokens": 32000,
    "system": [
        {"type": "text", "text": "You are Claude Code."},
        {
            "type": "text",
            "text": "<env>\nWorking directory: /home/u/acme\n</env>",
            "cache_control": {"type": "ephemeral"},
        },
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "fix the failing test",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "1 failed",
                    "is_error": True,
                },
            ],
        },
    ],
}


def _doc(body: object) -> JsonDoc:
    return JsonDoc(json.dumps(body).encode())


def test_reads_system_ask_and_tool_results() -> None:
    b = CLAUDE_CODE_TURN
    assert ANTHROPIC.model(b) == "claude-sonnet-4-5-20250929"
    assert "Working directory: /home/u/acme" in ANTHROPIC.system_text(b)
    # The last user turn holds only tool results: the ask is the first user message.
    assert ANTHROPIC.latest_user_index(b) == 0
    assert ANTHROPIC.user_text(b, 0) == "fix the failing test"
    [result] = ANTHROPIC.tool_results(b)
    assert (result.tool_use_id, result.content, result.is_error) == ("t1", "1 failed", True)


def test_append_user_tail_adds_a_block_after_the_clients_cache_breakpoint() -> None:
    doc = _doc(CLAUDE_CODE_TURN)
    edits.append_user_tail(ANTHROPIC, doc, 0, "[memory]")
    sent = json.loads(doc.to_bytes())
    content = sent["messages"][0]["content"]
    assert content[0] == CLAUDE_CODE_TURN["messages"][0]["content"][0]  # untouched, breakpoint kept
    assert content[1] == {"type": "text", "text": "[memory]"}


def test_append_user_tail_to_string_content_keeps_the_text_as_its_own_block() -> None:
    doc = _doc({"model": "m", "messages": [{"role": "user", "content": "hello"}]})
    edits.append_user_tail(ANTHROPIC, doc, 0, "x")
    assert json.loads(doc.to_bytes())["messages"][0]["content"] == [
        {"type": "text", "text": "hello"},
        {"type": "text", "text": "x"},
    ]


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        (None, [{"type": "text", "text": "tail"}]),
        ("be brief", [{"type": "text", "text": "be brief"}, {"type": "text", "text": "tail"}]),
        (
            [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
            [
                {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "tail"},
            ],
        ),
    ],
)
def test_a_system_block_goes_after_the_last_system_block(system: object, expected: object) -> None:
    body: dict[str, object] = {"model": "m", "messages": []}
    if system is not None:
        body["system"] = system
    doc = _doc(body)
    edits.put_system_block(ANTHROPIC, doc, "<t>", "</t>", "tail")
    assert json.loads(doc.to_bytes())["system"] == expected


def test_usage_is_normalised_with_one_hour_writes() -> None:
    u = ANTHROPIC.usage(
        {
            "input_tokens": 10,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 2000,
            "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
            "output_tokens": 42,
        }
    )
    assert (u.input_tokens, u.cache_write_tokens, u.cache_write_1h_tokens) == (10, 300, 200)
    assert (u.cache_read_tokens, u.output_tokens, u.total_input_tokens) == (2000, 42, 2310)


def _events(*pairs: tuple[str, dict[str, object]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in pairs)


STREAM = _events(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "usage": {
                    "input_tokens": 5,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 4000,
                    "output_tokens": 1,
                },
            },
        },
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Let me "},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "think."},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Running ✓"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"comm'},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'and":"ls"}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 37},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=30))
def test_stream_assembly_is_independent_of_chunk_boundaries(cuts: list[int]) -> None:
    bounds = [0, *sorted(set(cuts)), len(STREAM)]
    parser, asm = SSEParser(), ANTHROPIC.assembler()
    for a, b in itertools.pairwise(bounds):
        for ev in parser.feed(STREAM[a:b]):
            asm.feed(ev.event, ev.data)
    msg = asm.result()
    assert msg.complete and msg.stop_reason == "tool_use"
    thinking, text, tool = msg.blocks
    assert (thinking.type, thinking.text, thinking.signature) == (
        "thinking",
        "Let me think.",
        "c2lnbmF0dXJl",
    )
    assert text.text == "Running ✓"
    assert (tool.name, tool.input) == ("Bash", {"command": "ls"})
    assert msg.usage is not None
    assert (msg.usage.cache_read_tokens, msg.usage.output_tokens) == (4000, 37)


def test_cut_stream_is_incomplete_but_keeps_what_arrived() -> None:
    cut = STREAM[
        : STREAM.index(
            b'event: content_block_start\ndata: {"type": "content_block_start", "index": 2'
        )
    ]
    asm = ANTHROPIC.assembler()
    for ev in SSEParser().feed(cut):
        asm.feed(ev.event, ev.data)
    msg = asm.result()
    assert not msg.complete
    assert msg.text == "Running ✓"
    assert msg.usage is not None and msg.usage.cache_read_tokens == 4000


def test_error_body_shape() -> None:
    assert json.loads(ANTHROPIC.error_body(504, "slow")) == {
        "type": "error",
        "error": {"type": "timeout_error", "message": "slow"},
    }
