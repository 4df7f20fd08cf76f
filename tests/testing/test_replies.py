"""Reply construction and the pure renderers' invariants."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.testing import Reply, ToolCall
from ember.testing.cache_model import AnthropicUsage
from ember.testing.render_anthropic import render_stream as anthropic_stream
from ember.testing.render_common import Turn, split_json, split_text
from ember.testing.render_responses import render_stream as responses_stream
from ember.testing.replies import default_reply, signature_for, signature_is_valid


def test_text_is_both_a_constructor_and_a_field() -> None:
    reply = Reply("hello", delay=0.5)
    assert reply.text == "hello" and reply.delay == 0.5
    assert reply == Reply(text="hello", delay=0.5)
    assert reply != Reply(text="hello")


def test_tool_calls_are_normalised() -> None:
    reply = Reply(
        text="x",
        tool_calls=[("a", {"k": 1}), {"name": "b", "input": {"j": 2}, "id": "t1"}, ToolCall("c")],
    )
    assert reply.tool_calls == (
        ToolCall("a", {"k": 1}),
        ToolCall("b", {"j": 2}, "t1"),
        ToolCall("c"),
    )
    assert Reply.tool_use("a", {"k": 1}).tool_calls[0].arguments == '{"k":1}'


def test_error_needs_an_error_status() -> None:
    assert Reply.error(503, "down").is_error
    with pytest.raises(ValueError):
        Reply.error(200, "fine")


def test_replace_keeps_other_fields() -> None:
    reply = Reply("t", [("a", {})], cut_after=3).replace(thinking="hm")
    assert (reply.text, reply.thinking, reply.cut_after) == ("t", "hm", 3)
    assert len(reply.tool_calls) == 1


def test_default_reply_depends_only_on_the_text() -> None:
    text = "one two three four five six seven eight nine ten eleven twelve thirteen"
    assert default_reply(text) == default_reply(text)
    assert (
        default_reply(text).text.startswith("Noted: one two")
        and "thirteen" not in default_reply(text).text
    )
    assert default_reply("").text.startswith("Noted: (no text).")


def test_signatures() -> None:
    assert signature_is_valid("abc", signature_for("abc"))
    assert not signature_is_valid("abd", signature_for("abc"))


@given(st.text())
def test_split_text_reassembles(text: str) -> None:
    pieces = split_text(text)
    assert "".join(pieces) == text
    assert all(len(p.split()) <= 3 for p in pieces)


@given(st.text())
def test_split_json_reassembles(text: str) -> None:
    assert "".join(split_json(text)) == text


def _data(event: bytes) -> dict[str, object]:
    line = event.decode().split("\n")[-3]
    assert line.startswith("data: ")
    value = json.loads(line[6:])
    assert isinstance(value, dict)
    return value


def test_anthropic_stream_block_indexes() -> None:
    reply = Reply("text", [("a", {"x": 1}), ("b", {})], thinking="think")
    rendered = anthropic_stream(Turn(1, "m", reply, 0), AnthropicUsage(input_tokens=5))
    assert rendered.events is not None
    starts = [d for d in map(_data, rendered.events) if d["type"] == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2, 3]


def test_responses_stream_sequence_numbers() -> None:
    rendered = responses_stream(Turn(1, "m", Reply("a b c d e f g"), 0), 10, 0)
    assert rendered.events is not None
    numbers = [_data(e)["sequence_number"] for e in rendered.events]
    assert numbers == list(range(len(numbers)))
