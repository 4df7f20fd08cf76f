"""Rendering a reply as an Anthropic Messages answer: JSON message or SSE event sequence.

The stream follows what the official SDK's accumulator needs: ``message_start`` carrying the
full message with ``usage``, a ``ping``, then per content block ``content_block_start`` /
``content_block_delta``... / ``content_block_stop``, then ``message_delta`` (stop reason, final
``output_tokens`` and the cache counters again, as the real API repeats them) and
``message_stop``. Every event has an ``event:`` line; without it the SDK drops the event.
"""

from __future__ import annotations

from typing import Any

from ember.testing.cache_model import AnthropicUsage
from ember.testing.render_common import (
    Rendered,
    Turn,
    dumps,
    fail_after,
    json_response,
    reply_headers,
    split_json,
    split_text,
    sse,
    sse_response,
)
from ember.testing.replies import signature_for


def message_id(turn: Turn) -> str:
    return f"msg_emu_{turn.serial:08d}"


def content_blocks(turn: Turn) -> list[dict[str, Any]]:
    """The reply's content in the order the model emits it: thinking, text, tool uses."""
    reply = turn.reply
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": signature_for(reply.thinking),
            }
        )
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    for i, call in enumerate(reply.tool_calls):
        call_id = call.id or f"toolu_emu_{turn.serial:08d}_{i}"
        blocks.append({"type": "tool_use", "id": call_id, "name": call.name, "input": call.input})
    return blocks


def _stop_reason(turn: Turn, prewarm: bool) -> str:
    if prewarm:
        return "max_tokens"
    return "tool_use" if turn.reply.tool_calls else "end_turn"


def _message(turn: Turn, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {
        "id": message_id(turn),
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
    }


def render_json(turn: Turn, usage: AnthropicUsage, prewarm: bool = False) -> Rendered:
    """The non-streaming answer: a complete ``message`` object."""
    content = [] if prewarm else content_blocks(turn)
    message = _message(turn, content, _stop_reason(turn, prewarm))
    output = 0 if prewarm else turn.reply.output_tokens()
    message["usage"] = {**usage.as_dict(), "output_tokens": output, "service_tier": "standard"}
    return json_response(200, message, _headers(turn))


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    out: list[bytes] = []
    if kind == "thinking":
        start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in split_text(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        pieces = ["", *split_json(dumps(block["input"]))]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    else:
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in split_text(block["text"]) if p]
    out.append(
        sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    )
    for delta in deltas:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        out.append(sse("content_block_delta", payload))
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


def render_stream(turn: Turn, usage: AnthropicUsage) -> Rendered:
    """The streaming answer as a list of complete SSE events."""
    counters = usage.as_dict()
    start = _message(turn, [], None)
    start["usage"] = {**counters, "output_tokens": 1, "service_tier": "standard"}
    events = [
        sse("message_start", {"type": "message_start", "message": start}),
        sse("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(content_blocks(turn)):
        events.extend(_block_events(index, block))
    final_usage = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": turn.reply.output_tokens(),
    }
    delta = {"stop_reason": _stop_reason(turn, False), "stop_sequence": None}
    events.append(
        sse("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage})
    )
    events.append(sse("message_stop", {"type": "message_stop"}))
    return sse_response(events, _headers(turn))


def render_failure(turn: Turn, rendered: Rendered) -> Rendered:
    """``rendered`` failing after ``reply.error_after`` events with an ``error`` event (the
    way the API reports ``overloaded_error`` once a stream has begun); JSON: a 200 error body."""
    reply = turn.reply
    error = {
        "type": "error",
        "error": {"type": reply.error_type or "api_error", "message": reply.message},
    }
    after = reply.error_after or 0
    return fail_after(rendered, after, sse("error", error), error, _headers(turn))


def _headers(turn: Turn) -> list[tuple[bytes, bytes]]:
    return [(b"request-id", f"req_emu_{turn.serial:08d}".encode()), *reply_headers(turn.reply)]
