"""A ``model`` that is not a string -- from the client or echoed by a provider -- is forwarded,
answered and accounted like any other request; ember itself never answers 500 for it."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from ember.server import BackgroundServer
from ember.store.accounting import exchanges
from ember.testing.asgi_io import Receive, Scope, Send, lifespan, read_body
from tests.conftest import Stack, StackFactory

ODD_MODELS = [5, 2.5, {"name": "gpt-5"}, ["gpt-5"], None, True]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/messages": {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"input": "hi"},
}


def _rows(stack: Stack) -> list[dict[str, Any]]:
    stack.settle()
    return exchanges(stack.home / "stats.db")


@pytest.mark.parametrize("model", ODD_MODELS)
@pytest.mark.parametrize("path", list(BODIES))
def test_non_string_model_is_forwarded_and_accounted(
    full_stack: Stack, path: str, model: object
) -> None:
    body = json.dumps({"model": model, **BODIES[path]}).encode()
    r = httpx2.post(full_stack.url + path, content=body, headers={"x-api-key": "k"})
    # the emulator, like the provider, refuses the wrong type: that answer reaches the client
    assert r.status_code == 400 and "model" in r.text
    assert full_stack.emulator.last_request.json()["model"] == model
    [row] = _rows(full_stack)
    assert row["status"] == 400 and row["model"] is None


class _EchoModel:
    """An OpenAI-compatible server that takes any ``model`` and echoes it back verbatim."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        request = json.loads(await read_body(receive))
        answer = json.dumps(
            {
                "id": 7,
                "object": "chat.completion",
                "model": request.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        ).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


@pytest.mark.parametrize("model", ODD_MODELS)
def test_provider_echoing_a_non_string_model_does_not_drop_the_accounting_row(
    make_stack: StackFactory, model: object
) -> None:
    with BackgroundServer(_EchoModel()) as echo:
        stack = make_stack(stages="features", upstream=echo.url)
        body = {"model": model, **BODIES["/v1/chat/completions"]}
        r = httpx2.post(stack.url + "/v1/chat/completions", json=body)
        assert r.status_code == 200 and r.json()["model"] == model
        [row] = _rows(stack)
    assert row["status"] == 200 and row["model"] is None
    assert row["input_tokens"] == 3 and row["output_tokens"] == 1
