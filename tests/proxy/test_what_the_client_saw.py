"""Accounting says what the client saw: a cut JSON answer is a plain 502 in the protocol's own
shape, a streamed request answered with an error is still a streamed request, and the OpenAI
SDK's default streaming Chat request (no ``stream_options.include_usage``) is recorded with
estimated usage while its stream reaches the client byte for byte as the provider sent it.
Through the real proxy with the official SDKs against the emulator."""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember.proxy.relay import CUT_MESSAGE
from ember.store.accounting import exchanges, session_totals
from ember.testing import Reply
from tests.conftest import Stack

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CLAUDE = "claude-sonnet-4-5"
MSG: Any = {"model": CLAUDE, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
CHAT: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
ENDPOINTS: dict[str, Any] = {
    "/v1/messages": MSG,
    "/v1/chat/completions": CHAT,
    "/v1/responses": {"model": "gpt-5", "input": "hi"},
}
TEXT = "A reply long enough to come in several chunks, one after another, to the very end."


def rows(stack: Stack) -> list[dict[str, Any]]:
    stack.settle()
    return exchanges(stack.home / "stats.db")


def gpt(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)


# -- (a) a JSON answer cut mid-body --------------------------------------------------------------


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_cut_json_answer_is_a_plain_502_in_the_protocols_shape(stack: Stack, path: str) -> None:
    stack.emulator.script(Reply(TEXT, cut_after=1))  # JSON: the headers and half the body
    r = httpx2.post(stack.url + path, json=ENDPOINTS[path], headers={"x-api-key": "k"})
    assert r.status_code == 502
    err = r.json()
    if path == "/v1/messages":
        assert err["type"] == "error" and set(err["error"]) == {"type", "message"}
    else:
        assert set(err["error"]) == {"message", "type", "param", "code"}
    # plain words, nothing of the HTTP library underneath
    assert err["error"]["message"] == CUT_MESSAGE
    [row] = rows(stack)
    assert (row["status"], row["outcome"], row["stream"]) == (502, "cut", 0)
    # the provider produced (and may have billed) an answer whose usage never arrived
    assert row["usage_known"] == 0 and row["cost_usd"] is None


def test_sdks_read_the_cut_answer_as_a_502_with_the_plain_message(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT, cut_after=1), Reply(TEXT, cut_after=1))
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        pytest.raises(anthropic.APIStatusError) as claude_err,
    ):
        c.messages.create(**MSG)
    assert claude_err.value.status_code == 502
    assert claude_err.value.body["error"]["message"] == CUT_MESSAGE  # type: ignore[index]
    with gpt(stack) as g, pytest.raises(openai.APIStatusError) as gpt_err:
        g.chat.completions.create(**CHAT)
    assert gpt_err.value.status_code == 502 and CUT_MESSAGE in gpt_err.value.message


# -- (b) a 200 body holding an error --------------------------------------------------------------


def test_a_200_error_body_is_recorded_200_with_the_providers_error_type(stack: Stack) -> None:
    stack.emulator.script(Reply.failing("overloaded_error", "Overloaded"))
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c:
        raw = c.messages.with_raw_response.create(**MSG)
    assert raw.status_code == 200
    [row] = rows(stack)
    assert (row["status"], row["outcome"], row["error_type"]) == (
        200,
        "upstream_error",
        "overloaded_error",
    )


# -- (c) a streamed request answered with an error ----------------------------------------------


@pytest.mark.parametrize("path", list(ENDPOINTS))
@pytest.mark.parametrize("status", [400, 429, 529])
def test_streamed_request_answered_with_a_json_error_is_recorded_streamed(
    stack: Stack, path: str, status: int
) -> None:
    stack.emulator.script(Reply.error(status, "no"))
    body = {**ENDPOINTS[path], "stream": True}
    r = httpx2.post(stack.url + path, json=body, headers={"x-api-key": "k"})
    assert r.status_code == status and r.headers["content-type"].startswith("application/json")
    [row] = rows(stack)
    assert (row["status"], row["outcome"], row["stream"]) == (status, "upstream_error", 1)


def test_an_sdk_stream_refused_with_a_429_is_recorded_streamed(stack: Stack) -> None:
    stack.emulator.script(Reply.error(429, "slow down", "rate_limit_exceeded"))
    with gpt(stack) as c, pytest.raises(openai.RateLimitError):
        c.chat.completions.create(**CHAT, stream=True)
    [row] = rows(stack)
    assert (row["status"], row["stream"]) == (429, 1)


def test_a_request_that_did_not_ask_for_a_stream_stays_recorded_unstreamed(stack: Stack) -> None:
    stack.emulator.script(Reply.error(500, "boom"))
    httpx2.post(stack.url + "/v1/messages", json=MSG, headers={"x-api-key": "k"})
    httpx2.post(stack.url + "/v1/messages", json=MSG, headers={"x-api-key": "k"})
    assert [r["stream"] for r in rows(stack)] == [0, 0]


# -- (d) the OpenAI SDK's default streaming Chat request ----------------------------------------


def _sse(url: str, body: dict[str, Any]) -> bytes:
    with httpx2.stream("POST", url, json=body, headers={"authorization": "Bearer k"}) as r:
        assert r.status_code == 200
        return b"".join(r.iter_raw())


def _unstamped(stream: bytes) -> bytes:
    """The stream without what differs between two answers of the emulator (its serial
    number in ids, the clock second in ``created``); every other byte is compared."""
    stream = re.sub(rb"chatcmpl-emu\d+", b"chatcmpl-emu", stream)
    return re.sub(rb'"created":\d+', b'"created":0', stream)


def test_default_sdk_stream_is_recorded_with_estimated_usage(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT))
    with gpt(stack) as c:
        chunks = list(c.chat.completions.create(**CHAT, stream=True))
    assert chunks and all(chunk.usage is None for chunk in chunks)  # no usage asked, none sent
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == TEXT
    # ember asked the provider for nothing more than the client did
    assert "stream_options" not in stack.emulator.last_request.json()
    [row] = rows(stack)
    assert row["outcome"] == "ok" and row["stream"] == 1
    assert row["usage_known"] == 1 and row["usage_estimated"] == 1
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert row["cost_usd"] is not None and row["cost_usd"] > 0  # a price, not "unknown"


def test_the_estimate_is_near_what_the_provider_counts(stack: Stack) -> None:
    """Same request twice: once as the SDK sends it by default (estimated), once asking for
    usage (counted by the provider). An estimate is an estimate: within a factor of two."""
    words = " ".join(f"word{i}" for i in range(300))
    body: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": words}]}
    long_text = " ".join(f"answer{i}" for i in range(200))
    stack.emulator.script(Reply(long_text), Reply(long_text))
    with gpt(stack) as c:
        list(c.chat.completions.create(**body, stream=True))
        counted = list(
            c.chat.completions.create(**body, stream=True, stream_options={"include_usage": True})
        )
    usage = counted[-1].usage
    assert usage is not None
    estimated, reported = rows(stack)
    assert (estimated["usage_estimated"], reported["usage_estimated"]) == (1, 0)
    assert reported["input_tokens"] == usage.prompt_tokens
    for column in ("input_tokens", "output_tokens"):
        ratio = estimated[column] / reported[column]
        assert 0.5 <= ratio <= 2.0, f"{column}: estimated {estimated[column]} vs {reported[column]}"


def test_the_clients_stream_is_byte_for_byte_what_the_provider_sent(stack: Stack) -> None:
    body = {**CHAT, "stream": True}
    stack.emulator.script(Reply(TEXT), Reply(TEXT))
    through = _sse(stack.url + "/v1/chat/completions", body)
    direct = _sse(stack.upstream_url + "/v1/chat/completions", body)
    assert _unstamped(through) == _unstamped(direct)
    assert b'"usage"' not in through  # no usage chunk, no "usage": null added to any chunk
    events = [e for e in through.split(b"\n\n") if e]
    assert events[-1] == b"data: [DONE]"
    assert all(json.loads(e[len(b"data: ") :])["choices"] for e in events[:-1])


def test_session_totals_count_the_estimated_requests(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT), Reply(TEXT))
    session = {"x-ember-session-id": "est"}
    with gpt(stack) as c:
        list(c.chat.completions.create(**CHAT, stream=True, extra_headers=session))
        c.chat.completions.create(**CHAT, extra_headers=session)  # JSON: usage reported
    stack.settle()
    [total] = session_totals(stack.home / "stats.db")
    assert (total["requests"], total["estimated_requests"]) == (2, 1)


def test_a_stream_the_client_leaves_before_its_usage_is_estimated_not_unknown(
    stack: Stack,
) -> None:
    """The provider read the prompt and began answering (and bills it); the client went away
    before any usage came: the row is estimated, and marked so, rather than of unknown cost
    (which would turn a project's budget to weighted tokens for a week)."""
    stack.emulator.script(Reply(" ".join(f"w{i}" for i in range(400)), delay=0.02))
    with gpt(stack) as c:
        stream = c.chat.completions.create(**CHAT, stream=True)
        next(iter(stream))  # the answer has begun
        stream.close()  # and the client leaves
    stack.settle()
    [row] = rows(stack)
    assert row["outcome"] == "cancelled"
    assert row["usage_estimated"] == 1 and row["input_tokens"] > 0
    assert row["cost_usd"] is not None and row["cost_usd"] > 0
