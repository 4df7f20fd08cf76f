"""The official SDKs through the proxy against the emulator: every endpoint, sync, async and
streaming; the provider receives exactly the bytes the client sent."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember.testing import Reply
from tests.conftest import Stack

CLAUDE = "claude-sonnet-4-5"
BETA = "interleaved-thinking-2025-05-14"


class Capture:
    """An httpx event hook keeping the exact bytes the SDK put on the wire."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: httpx2.Request) -> None:
        self.bodies.append(request.content)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})

    async def async_hook(self, request: httpx2.Request) -> None:
        self(request)


def _anthropic(stack: Stack, cap: Capture) -> anthropic.Anthropic:
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [cap]})
    return anthropic.Anthropic(
        base_url=stack.url,
        api_key="sk-ant-test",
        max_retries=0,
        http_client=http,
        default_headers={"anthropic-beta": BETA, "x-ember-session-id": "s1"},
    )


def _openai(stack: Stack, cap: Capture) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(event_hooks={"request": [cap]})
    return openai.OpenAI(
        base_url=stack.url + "/v1", api_key="sk-test", max_retries=0, http_client=http
    )


def _assert_forwarded(stack: Stack, cap: Capture, path: str) -> None:
    got = stack.emulator.last_request
    assert got.path == path
    assert got.body == cap.bodies[-1], "the provider must receive the client's exact bytes"
    assert not any(k.startswith("x-ember-") for k, _ in got.headers)
    sent = cap.headers[-1]
    for name in ("authorization", "x-api-key", "anthropic-version", "anthropic-beta"):
        assert got.header(name) == sent.get(name), f"{name} must be forwarded unchanged"


def test_anthropic_sync_json_and_headers(stack: Stack) -> None:
    cap = Capture()
    stack.emulator.script(Reply.tool_use("read_file", {"path": "a.py"}, text="Reading."))
    with _anthropic(stack, cap) as client:
        msg = client.messages.create(
            model=CLAUDE,
            max_tokens=256,
            system="You are terse.",
            messages=[{"role": "user", "content": "open a.py"}],
        )
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[1].input == {"path": "a.py"}  # type: ignore[union-attr]
    _assert_forwarded(stack, cap, "/v1/messages")
    got = stack.emulator.last_request
    assert got.api_key == "sk-ant-test"
    assert got.header("anthropic-version") is not None
    assert got.header("anthropic-beta") == BETA


def test_anthropic_stream_with_thinking_signature(stack: Stack) -> None:
    cap = Capture()
    stack.emulator.script(Reply("Done.", thinking="Plan: answer briefly."))
    with (
        _anthropic(stack, cap) as client,
        client.messages.stream(
            model=CLAUDE,
            max_tokens=2048,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "hi"}],
        ) as stream,
    ):
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Done."
    assert final.content[0].type == "thinking"
    assert final.content[0].signature  # type: ignore[union-attr]
    _assert_forwarded(stack, cap, "/v1/messages")


async def test_anthropic_async_json_and_stream(stack: Stack) -> None:
    cap = Capture()
    http = anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [cap.async_hook]})
    async with anthropic.AsyncAnthropic(
        base_url=stack.url, api_key="k", max_retries=0, http_client=http
    ) as client:
        msg = await client.messages.create(
            model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "ping"}]
        )
        assert msg.content[0].text.startswith("Noted: ping")  # type: ignore[union-attr]
        _assert_forwarded(stack, cap, "/v1/messages")
        events = [
            e.type
            async for e in await client.messages.create(
                model=CLAUDE,
                max_tokens=64,
                stream=True,
                messages=[{"role": "user", "content": "ping"}],
            )
        ]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    _assert_forwarded(stack, cap, "/v1/messages")


def test_chat_completions_sync_and_stream(stack: Stack) -> None:
    cap = Capture()
    stack.emulator.script(Reply.tool_use("ls", {"dir": "."}))
    with _openai(stack, cap) as client:
        r = client.chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "list"}]
        )
        assert r.choices[0].finish_reason == "tool_calls"
        _assert_forwarded(stack, cap, "/v1/chat/completions")
        with client.chat.completions.stream(
            model="gpt-5",
            messages=[{"role": "user", "content": "hello"}],
            stream_options={"include_usage": True},
        ) as stream:
            final = stream.get_final_completion()
    assert final.choices[0].message.content == "Noted: hello. " + _default_sentence(stack)
    assert final.usage is not None and final.usage.completion_tokens > 0
    _assert_forwarded(stack, cap, "/v1/chat/completions")
    assert stack.emulator.last_request.header("authorization") == "Bearer sk-test"


def _default_sentence(stack: Stack) -> str:
    from ember.testing.replies import DEFAULT_SENTENCE

    return DEFAULT_SENTENCE


async def test_chat_completions_async(stack: Stack) -> None:
    cap = Capture()
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [cap.async_hook]})
    async with openai.AsyncOpenAI(
        base_url=stack.url + "/v1", api_key="k", max_retries=0, http_client=http
    ) as client:
        r = await client.chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "async hi"}]
        )
        chunks = [
            c
            async for c in await client.chat.completions.create(
                model="gpt-5", stream=True, messages=[{"role": "user", "content": "async hi"}]
            )
        ]
    assert r.choices[0].message.content is not None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        r.choices[0].message.content
    )
    _assert_forwarded(stack, cap, "/v1/chat/completions")


@pytest.mark.parametrize("stream", [False, True])
def test_responses_sync(stack: Stack, stream: bool) -> None:
    cap = Capture()
    with _openai(stack, cap) as client:
        if stream:
            with client.responses.stream(
                model="gpt-5", input="stream me", instructions="be brief"
            ) as s:
                text = s.get_final_response().output_text
        else:
            text = client.responses.create(
                model="gpt-5", input="stream me", instructions="be brief"
            ).output_text
    assert text.startswith("Noted: stream me")
    _assert_forwarded(stack, cap, "/v1/responses")


async def test_responses_async_stream(stack: Stack) -> None:
    cap = Capture()
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [cap.async_hook]})
    async with openai.AsyncOpenAI(
        base_url=stack.url + "/v1", api_key="k", max_retries=0, http_client=http
    ) as client:
        kinds: list[Any] = [
            e.type
            async for e in await client.responses.create(
                model="gpt-5", input=[{"role": "user", "content": "x"}], stream=True
            )
        ]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    _assert_forwarded(stack, cap, "/v1/responses")


def test_query_string_and_unknown_paths_pass_through(stack: Stack) -> None:
    cap = Capture()
    with _anthropic(stack, cap) as client:
        n = client.messages.count_tokens(
            model=CLAUDE, messages=[{"role": "user", "content": "count me"}]
        )
    assert n.input_tokens > 0
    assert stack.emulator.last_request.path == "/v1/messages/count_tokens"
    r = httpx2.post(
        stack.url + "/v1/messages?beta=true",
        headers={"x-api-key": "k"},
        content=b'{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"q"}]}',
    )
    assert r.status_code == 200
    assert stack.emulator.last_request.query_string == "beta=true"
