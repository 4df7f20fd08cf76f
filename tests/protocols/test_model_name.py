"""A provider that echoes a non-string ``model`` (or ``id``) must not hand accounting a value
it cannot price: the adapters read both as a string or nothing, from JSON and from streams."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, ProtocolAdapter

ODD = [5, 2.5, {"name": "m"}, ["m"], None, True]


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize(
    ("adapter", "body"),
    [
        (ANTHROPIC, {"type": "message", "content": [], "usage": {}}),
        (OPENAI_CHAT, {"object": "chat.completion", "choices": []}),
        (OPENAI_RESPONSES, {"object": "response", "output": []}),
    ],
)
def test_answer_with_a_non_string_model_reads_as_no_model(
    adapter: ProtocolAdapter, body: dict[str, object], odd: object
) -> None:
    msg = adapter.parse_response({**body, "model": odd, "id": odd})
    assert msg.model is None and msg.id is None
    assert adapter.model({"model": odd}) is None


@pytest.mark.parametrize("odd", ODD)
@pytest.mark.parametrize(
    ("adapter", "event", "payload"),
    [
        (ANTHROPIC, "message_start", lambda m: {"type": "message_start", "message": m}),
        (OPENAI_CHAT, None, lambda m: {**m, "object": "chat.completion.chunk", "choices": []}),
        (
            OPENAI_RESPONSES,
            "response.created",
            lambda m: {"type": "response.created", "response": m},
        ),
    ],
)
def test_stream_with_a_non_string_model_reads_as_no_model(
    adapter: ProtocolAdapter,
    event: str | None,
    payload: Callable[[dict[str, object]], dict[str, object]],
    odd: object,
) -> None:
    asm = adapter.assembler()
    asm.feed(event, json.dumps(payload({"model": odd, "id": odd})))
    msg = asm.result()
    assert msg.model is None and msg.id is None
