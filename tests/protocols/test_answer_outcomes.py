"""What the assemblers say about how an answer ended: its terminal event, an error reported
inside it, and everything else of the answer kept intact alongside."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter


def sse(events: Sequence[tuple[str | None, Any]], end: bytes = b"\n") -> list[bytes]:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        head = f"event: {name}{end.decode()}" if name else ""
        out.append(f"{head}data: {text}{end.decode()}{end.decode()}".encode())
    return out


def run(adapter: ProtocolAdapter, chunks: list[bytes]) -> AssembledMessage:
    msg = assemble(adapter, chunks, streamed=True)
    assert msg is not None
    return msg


# -- Anthropic --------------------------------------------------------------------------------

THINKING = {"type": "thinking", "thinking": "", "signature": ""}
REDACTED = {"type": "redacted_thinking", "data": "b3BhcXVl"}


def anthropic_head() -> list[tuple[str, Any]]:
    usage = {"input_tokens": 12, "cache_read_input_tokens": 300, "output_tokens": 1}
    return [
        ("message_start", {"type": "message_start", "message": {"id": "m1", "usage": usage}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": THINKING},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Plan."},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "U2ln"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": REDACTED},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "text_delta", "text": "Half an"},
            },
        ),
    ]


ANTHROPIC_TAIL: list[tuple[str, Any]] = [
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def test_overloaded_error_event_mid_stream_is_reported_with_status_529() -> None:
    msg = run(ANTHROPIC, sse([*anthropic_head(), ("error", OVERLOADED)]))
    assert msg.error is not None
    assert (msg.error.type, msg.error.message, msg.error.status) == (
        "overloaded_error",
        "Overloaded",
        529,
    )
    assert not msg.complete


@pytest.mark.parametrize(
    ("kind", "status"),
    [("rate_limit_error", 429), ("api_error", 500), ("timeout_error", 504), ("new_error", 500)],
)
def test_anthropic_error_type_maps_to_the_status_the_api_uses(kind: str, status: int) -> None:
    error = {"type": "error", "error": {"type": kind, "message": "m"}}
    msg = run(ANTHROPIC, sse([*anthropic_head(), ("error", error)]))
    assert msg.error is not None and (msg.error.type, msg.error.status) == (kind, status)


def test_error_event_keeps_thinking_signature_and_redacted_thinking_that_arrived() -> None:
    msg = run(ANTHROPIC, sse([*anthropic_head(), ("error", OVERLOADED)]))
    thinking, redacted, text = msg.blocks
    assert (thinking.type, thinking.text, thinking.signature) == ("thinking", "Plan.", "U2ln")
    assert (redacted.type, redacted.data) == ("redacted_thinking", "b3BhcXVl")
    assert text.text == "Half an"
    assert msg.usage is not None and msg.usage.cache_read_tokens == 300


def test_stream_closed_before_message_stop_is_not_complete() -> None:
    msg = run(ANTHROPIC, sse(anthropic_head()))
    assert not msg.complete and msg.error is None


def test_stream_ending_after_the_final_message_delta_is_complete() -> None:
    """The SDK takes such a stream as whole (a missing ``message_stop`` does not break it)."""
    msg = run(ANTHROPIC, sse([*anthropic_head(), *ANTHROPIC_TAIL[:2]]))
    assert msg.complete and msg.stop_reason == "end_turn" and msg.error is None
    assert [b.type for b in msg.blocks] == ["thinking", "redacted_thinking", "text"]


def test_anthropic_200_json_error_body_is_an_error() -> None:
    msg = assemble(ANTHROPIC, [json.dumps(OVERLOADED).encode()], streamed=False)
    assert msg is not None and msg.error is not None and msg.error.status == 529


# -- OpenAI Chat ------------------------------------------------------------------------------


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-5",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


CHAT_HEAD = [
    (None, chat_chunk({"role": "assistant", "content": ""})),
    (None, chat_chunk({"content": "Half"})),
]


def test_error_chunk_mid_stream_is_reported_with_its_status() -> None:
    error = {
        "error": {
            "message": "The server had an error",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    msg = run(OPENAI_CHAT, sse([*CHAT_HEAD, (None, error)]))
    assert msg.error is not None
    assert (msg.error.type, msg.error.message, msg.error.status) == (
        "server_error",
        "The server had an error",
        500,
    )
    assert msg.text == "Half"


@pytest.mark.parametrize(
    ("error", "name", "status"),
    [
        (
            {"type": "requests", "code": "rate_limit_exceeded", "message": "m"},
            "rate_limit_exceeded",
            429,
        ),
        ({"type": "BadRequestError", "code": 400, "message": "m"}, "BadRequestError", 400),
        (
            {"type": "invalid_request_error", "code": "context_length_exceeded"},
            "context_length_exceeded",
            400,
        ),
        ({"type": "weird", "code": None, "message": "m"}, "weird", 500),
        ({"code": "503", "message": "m"}, "server_error", 503),
        ("a bare string", "server_error", 500),
    ],
)
def test_openai_error_code_or_type_picks_the_status(error: Any, name: str, status: int) -> None:
    msg = run(OPENAI_CHAT, sse([*CHAT_HEAD, (None, {"error": error})]))
    assert msg.error is not None and (msg.error.type, msg.error.status) == (name, status)


def test_chat_stream_closed_before_done_or_finish_reason_is_not_complete() -> None:
    msg = run(OPENAI_CHAT, sse(CHAT_HEAD))
    assert not msg.complete and msg.error is None


def test_chat_stream_with_finish_reason_but_no_done_is_complete() -> None:
    msg = run(OPENAI_CHAT, sse([*CHAT_HEAD, (None, chat_chunk({}, "stop"))]))
    assert msg.complete and msg.stop_reason == "stop"


def test_chat_chunk_with_a_null_error_field_is_no_error() -> None:
    chunk = {**chat_chunk({"content": "!"}, "stop"), "error": None}
    msg = run(OPENAI_CHAT, sse([*CHAT_HEAD, (None, chunk), (None, "[DONE]")]))
    assert msg.error is None and msg.complete and msg.text == "Half!"


def test_chat_200_json_error_body_is_an_error() -> None:
    body = {"error": {"message": "Rate limit", "type": "requests", "code": "rate_limit_exceeded"}}
    msg = assemble(OPENAI_CHAT, [json.dumps(body).encode()], streamed=False)
    assert msg is not None and msg.error is not None and msg.error.status == 429


# -- OpenAI Responses ---------------------------------------------------------------------------

REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Think first."}],
    "encrypted_content": "ZW5jcnlwdGVk",
}


def responses_head() -> list[tuple[str, Any]]:
    return [
        (
            "response.created",
            {"type": "response.created", "response": {"id": "r1", "model": "gpt-5"}},
        ),
        ("response.output_item.done", {"type": "response.output_item.done", "item": REASONING}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Half"}),
    ]


def failed_response(error: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": "r1", "object": "response", "status": "failed", "error": error, "output": []}


def test_response_failed_is_reported_with_its_code_and_keeps_the_reasoning() -> None:
    failed = failed_response({"code": "server_error", "message": "An error occurred"})
    events = [
        *responses_head(),
        ("response.failed", {"type": "response.failed", "response": failed}),
    ]
    msg = run(OPENAI_RESPONSES, sse(events))
    assert msg.error is not None
    assert (msg.error.type, msg.error.message, msg.error.status) == (
        "server_error",
        "An error occurred",
        500,
    )
    [reasoning] = msg.blocks  # the failed response had no output: what streamed is kept
    assert (reasoning.type, reasoning.text, reasoning.signature) == (
        "thinking",
        "Think first.",
        "ZW5jcnlwdGVk",
    )


def test_response_failed_without_an_error_object_is_still_an_error() -> None:
    events = [
        *responses_head(),
        ("response.failed", {"type": "response.failed", "response": failed_response(None)}),
    ]
    msg = run(OPENAI_RESPONSES, sse(events))
    assert msg.error is not None and msg.error.status == 500


def test_responses_error_event_is_reported_with_its_code() -> None:
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None}
    msg = run(OPENAI_RESPONSES, sse([*responses_head(), ("error", error)]))
    assert msg.error is not None
    assert (msg.error.type, msg.error.status) == ("rate_limit_exceeded", 429)
    assert not msg.complete


def test_websocket_error_event_keeps_the_http_status_it_carries() -> None:
    """Over WebSocket a refused request is an ``error`` event with its HTTP ``status``: a
    ``usage_limit_reached`` 429 must not be counted as the 500 its unknown type would give."""
    error = {
        "type": "error",
        "status": 429,
        "error": {"type": "usage_limit_reached", "message": "The usage limit has been reached"},
    }
    msg = run(OPENAI_RESPONSES, sse([("error", error)]))
    assert msg.error is not None
    assert (msg.error.type, msg.error.status) == ("usage_limit_reached", 429)


def test_responses_stream_closed_before_completed_is_not_complete_but_keeps_reasoning() -> None:
    msg = run(OPENAI_RESPONSES, sse(responses_head()))
    assert not msg.complete and msg.error is None
    assert [(b.type, b.signature) for b in msg.blocks] == [("thinking", "ZW5jcnlwdGVk")]


def test_response_incomplete_at_max_output_tokens_is_complete_and_no_error() -> None:
    """Like Anthropic's ``max_tokens`` stop or Chat's ``length``: a whole, billed answer."""
    incomplete = {
        "id": "r1",
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "error": None,
        "output": [REASONING],
        "usage": {"input_tokens": 10, "output_tokens": 64},
    }
    events = [
        *responses_head(),
        ("response.incomplete", {"type": "response.incomplete", "response": incomplete}),
    ]
    msg = run(OPENAI_RESPONSES, sse(events))
    assert msg.complete and msg.error is None and msg.stop_reason == "incomplete"
    assert msg.usage is not None and msg.usage.output_tokens == 64
    assert msg.blocks[0].signature == "ZW5jcnlwdGVk"


def test_responses_200_json_failed_response_is_an_error() -> None:
    body = failed_response({"code": "server_error", "message": "boom"})
    msg = assemble(OPENAI_RESPONSES, [json.dumps(body).encode()], streamed=False)
    assert msg is not None and msg.error is not None and msg.error.type == "server_error"


@pytest.mark.parametrize("adapter", [ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES])
def test_a_200_json_body_that_is_not_an_object_is_an_error(adapter: ProtocolAdapter) -> None:
    msg = assemble(adapter, [b"[1, 2]"], streamed=False)
    assert msg is not None and msg.error is not None and msg.error.status == 502
