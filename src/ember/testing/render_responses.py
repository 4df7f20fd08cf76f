"""Rendering a reply as an OpenAI Responses answer: ``response`` object or typed events.

Each SSE event has an ``event: <type>`` line and a ``data:`` object with the same ``type`` and
a strictly increasing ``sequence_number``. The first (``response.created``) and last
(``response.completed``) carry a full response object with the same ``id``; the SDK's stream
helper rejects a lifecycle event whose id changed, and an output item that was added but never
finished.
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
    sse,
    sse_response,
)


def response_id(turn: Turn) -> str:
    return f"resp_emu_{turn.serial:08d}"


def _message_item(turn: Turn, text: str, done: bool) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "id": f"msg_emu_{turn.serial:08d}",
        "type": "message",
        "status": "completed" if done else "in_progress",
        "role": "assistant",
        "content": content if done else [],
    }


def _call_item(turn: Turn, index: int, done: bool) -> dict[str, Any]:
    call = turn.reply.tool_calls[index]
    item = {
        "id": f"fc_emu_{turn.serial:08d}_{index}",
        "type": "function_call",
        "status": "completed" if done else "in_progress",
        "call_id": call.id or f"call_emu_{turn.serial:08d}_{index}",
        "name": call.name,
        "arguments": call.arguments if done else "",
    }
    if call.namespace is not None:
        item["namespace"] = call.namespace
    return item


def output_items(turn: Turn) -> list[dict[str, Any]]:
    """Completed output items: a message when there is text (or nothing else), then calls."""
    reply = turn.reply
    items = []
    if reply.text or not reply.tool_calls:
        items.append(_message_item(turn, reply.text, True))
    items.extend(_call_item(turn, i, True) for i in range(len(reply.tool_calls)))
    return items


def _usage(turn: Turn, prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    output = turn.reply.output_tokens()
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + output,
    }


def _response(turn: Turn, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    request = turn.request
    return {
        "id": response_id(turn),
        "object": "response",
        "created_at": turn.created,
        "completed_at": turn.created if status == "completed" else None,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": {"effort": None, "summary": None},
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text", {"format": {"type": "text"}}),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "metadata": request.get("metadata", {}),
    }


def render_json(turn: Turn, prompt_tokens: int, cached_tokens: int) -> Rendered:
    """The non-streaming answer: a completed ``response`` object."""
    body = _response(turn, "completed", output_items(turn))
    body["usage"] = _usage(turn, prompt_tokens, cached_tokens)
    return json_response(200, body, reply_headers(turn.reply))


class _Events:
    """Collects events, numbering them: ``sequence_number`` must increase by one each time."""

    def __init__(self) -> None:
        self.items: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": len(self.items), **fields}
        self.items.append(sse(kind, payload))


def _message_events(out: _Events, turn: Turn, index: int) -> None:
    item = _message_item(turn, "", False)
    ids = {"item_id": item["id"], "output_index": index}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    out.add("response.output_item.added", output_index=index, item=item)
    out.add("response.content_part.added", **ids, content_index=0, part=part)
    for piece in split_text(turn.reply.text):
        out.add("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[])
    text = turn.reply.text
    out.add("response.output_text.done", **ids, content_index=0, text=text, logprobs=[])
    out.add("response.content_part.done", **ids, content_index=0, part={**part, "text": text})
    out.add("response.output_item.done", output_index=index, item=_message_item(turn, text, True))


def _call_events(out: _Events, turn: Turn, call_index: int, index: int) -> None:
    item = _call_item(turn, call_index, False)
    ids = {"item_id": item["id"], "output_index": index}
    arguments = turn.reply.tool_calls[call_index].arguments
    out.add("response.output_item.added", output_index=index, item=item)
    for piece in split_json(arguments):
        out.add("response.function_call_arguments.delta", **ids, delta=piece)
    out.add("response.function_call_arguments.done", **ids, arguments=arguments)
    done = _call_item(turn, call_index, True)
    out.add("response.output_item.done", output_index=index, item=done)


def render_stream(turn: Turn, prompt_tokens: int, cached_tokens: int) -> Rendered:
    """The streaming answer as a list of complete SSE events."""
    out = _Events()
    out.add("response.created", response=_response(turn, "in_progress", []))
    out.add("response.in_progress", response=_response(turn, "in_progress", []))
    index = 0
    if turn.reply.text or not turn.reply.tool_calls:
        _message_events(out, turn, index)
        index += 1
    for call_index in range(len(turn.reply.tool_calls)):
        _call_events(out, turn, call_index, index)
        index += 1
    final = _response(turn, "completed", output_items(turn))
    final["usage"] = _usage(turn, prompt_tokens, cached_tokens)
    out.add("response.completed", response=final)
    return sse_response(out.items, reply_headers(turn.reply))


def render_prepared(turn: Turn, prompt_tokens: int, cached_tokens: int) -> Rendered:
    """The answer to ``generate: false`` (WebSocket only): the request state is prepared and
    the prompt cached, nothing is generated: ``response.created`` then ``response.completed``
    with no output and no output tokens."""
    out = _Events()
    out.add("response.created", response=_response(turn, "in_progress", []))
    final = _response(turn, "completed", [])
    final["usage"] = {**_usage(turn, prompt_tokens, cached_tokens), "output_tokens": 0}
    final["usage"]["total_tokens"] = prompt_tokens
    out.add("response.completed", response=final)
    return sse_response(out.items)


def render_failure(turn: Turn, rendered: Rendered) -> Rendered:
    """``rendered`` failing after ``reply.error_after`` events with ``response.failed`` (the
    response with ``status: "failed"`` and ``error: {code, message}``); JSON: that failed
    response as a 200 body, as retrieving a failed response returns it."""
    reply = turn.reply
    failed = _response(turn, "failed", [])
    failed["error"] = {"code": reply.error_type or "server_error", "message": reply.message}
    after = min(reply.error_after or 0, len(rendered.events or []))
    payload = {"type": "response.failed", "sequence_number": after, "response": failed}
    event = sse("response.failed", payload)
    return fail_after(rendered, after, event, failed, reply_headers(reply))
