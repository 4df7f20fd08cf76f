"""Rendering a reply as an OpenAI Chat Completions answer: ``chat.completion`` or chunks.

The stream is ``data: {chunk}`` lines (no ``event:`` line) ending in ``data: [DONE]``. Every
chunk has ``"object": "chat.completion.chunk"`` and an ``index`` in each choice, which the SDK's
``.stream()`` helper relies on. Order: a role delta, content deltas, per tool call a delta with
id/type/name then argument pieces, a chunk carrying ``finish_reason``, then (when
``stream_options.include_usage``) a chunk with empty ``choices`` and the usage.
"""

from __future__ import annotations

from typing import Any

from ember.testing.render_common import (
    Rendered,
    Turn,
    fail_after,
    json_response,
    reply_headers,
    split_json,
    split_text,
    sse_response,
)
from ember.testing.render_common import dumps as _dumps


def completion_id(turn: Turn) -> str:
    return f"chatcmpl-emu{turn.serial:08d}"


def _call_id(turn: Turn, index: int, given: str | None) -> str:
    return given or f"call_emu_{turn.serial:08d}_{index}"


def usage(turn: Turn, prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """``usage`` with the details objects the SDK types declare."""
    completion = turn.reply.output_tokens()
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish(turn: Turn) -> str:
    return "tool_calls" if turn.reply.tool_calls else "stop"


def render_json(turn: Turn, prompt_tokens: int, cached_tokens: int) -> Rendered:
    """The non-streaming answer."""
    reply = turn.reply
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(turn, i, call.id),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    body = {
        "id": completion_id(turn),
        "object": "chat.completion",
        "created": turn.created,
        "model": turn.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(turn)}
        ],
        "usage": usage(turn, prompt_tokens, cached_tokens),
        "service_tier": "default",
        "system_fingerprint": "fp_emulator",
    }
    return json_response(200, body, reply_headers(reply))


def _tool_deltas(turn: Turn) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    for i, call in enumerate(turn.reply.tool_calls):
        head = {
            "index": i,
            "id": _call_id(turn, i, call.id),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        deltas.append({"tool_calls": [head]})
        for piece in split_json(call.arguments):
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    return deltas


def render_stream(
    turn: Turn, prompt_tokens: int, cached_tokens: int, include_usage: bool
) -> Rendered:
    """The streaming answer as a list of complete SSE events."""
    reply = turn.reply
    base = {
        "id": completion_id(turn),
        "object": "chat.completion.chunk",
        "created": turn.created,
        "model": turn.model,
        "system_fingerprint": "fp_emulator",
    }
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return f"data: {_dumps({**base, 'choices': [choice]})}\n\n".encode()

    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if reply.text:
        events.extend(chunk({"content": piece}) for piece in split_text(reply.text))
    events.extend(chunk(delta) for delta in _tool_deltas(turn))
    events.append(chunk({}, _finish(turn)))
    if include_usage:
        tail = {**base, "choices": [], "usage": usage(turn, prompt_tokens, cached_tokens)}
        events.append(f"data: {_dumps(tail)}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return sse_response(events, reply_headers(reply))


def render_failure(turn: Turn, rendered: Rendered) -> Rendered:
    """``rendered`` failing after ``reply.error_after`` events with a chunk holding ``error``
    (no ``[DONE]`` follows); JSON: a 200 body ``{"error": {...}}``."""
    reply = turn.reply
    error = {
        "error": {
            "message": reply.message,
            "type": reply.error_type or "server_error",
            "param": None,
            "code": None,
        }
    }
    event = f"data: {_dumps(error)}\n\n".encode()
    return fail_after(rendered, reply.error_after or 0, event, error, reply_headers(reply))
