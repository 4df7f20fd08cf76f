"""Failures after a 200 are recorded as failures: an error event inside a stream, a stream that
closes cleanly before its final event, a 200 body that is an error. Through the real proxy with
the official SDKs; the client still gets exactly what the provider sent, and the row keeps the
status the client saw (200) with the provider's error type beside it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.store.accounting import exchanges
from ember.testing import Reply
from tests.conftest import Stack

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CLAUDE = "claude-sonnet-4-5"
MSG: Any = {"model": CLAUDE, "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]}
CHAT: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
TEXT = "An answer that would take a good many words to finish properly, one after another."


def rows(stack: Stack) -> list[dict[str, Any]]:
    stack.settle()
    return exchanges(stack.home / "stats.db")


def claude(stack: Stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0)


def gpt(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)


def sse_lines(stack: Stack, path: str, body: dict[str, Any]) -> list[str]:
    """The stream as the client receives it through the proxy (raises if it was cut)."""
    with httpx2.stream("POST", stack.url + path, json={**body, "stream": True}) as r:
        assert r.status_code == 200
        return [line for line in r.iter_lines() if line]


# -- an error event inside a stream ------------------------------------------------------------


def test_overloaded_error_event_mid_stream_is_not_recorded_ok(stack: Stack) -> None:
    stack.emulator.script(Reply.failing("overloaded_error", "Overloaded", after=5, text=TEXT))
    received: list[str] = []
    with (
        claude(stack) as c,
        pytest.raises(anthropic.APIStatusError) as err,
        c.messages.stream(**MSG) as s,
    ):
        received.extend(s.text_stream)
    assert received, "the answer began before the error"
    assert err.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("stream_error", 200)  # what the client saw
    assert row["error_type"] == "overloaded_error"
    assert row["usage_known"] == 1 and row["input_tokens"] > 0  # what message_start reported


def test_chat_error_chunk_mid_stream_is_not_recorded_ok(stack: Stack) -> None:
    stack.emulator.script(Reply.failing("server_error", "The server had an error", after=3))
    with gpt(stack) as c, pytest.raises(openai.APIError) as err:
        for _ in c.chat.completions.create(**CHAT, stream=True):
            pass
    assert "The server had an error" in err.value.message
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("stream_error", 200)  # what the client saw
    assert row["error_type"] == "server_error"


def test_responses_failed_mid_stream_is_not_recorded_ok(stack: Stack) -> None:
    stack.emulator.script(Reply.failing("rate_limit_exceeded", "Slow down", after=4))
    with gpt(stack) as c:
        events = list(c.responses.create(model="gpt-5", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("stream_error", 200)  # what the client saw
    assert row["error_type"] == "rate_limit_exceeded"


def test_chat_stream_error_without_usage_is_unpriced_not_free(stack: Stack) -> None:
    """A stream that failed midway may have been billed for what it generated."""
    stack.emulator.script(Reply.failing("server_error", "boom", after=3))
    with gpt(stack) as c, pytest.raises(openai.APIError):
        for _ in c.chat.completions.create(**CHAT, stream=True):
            pass
    [row] = rows(stack)
    assert row["usage_known"] == 0 and row["cost_usd"] is None


# -- a stream that closes cleanly before its final event -----------------------------------------


def test_stream_closed_before_message_stop_is_recorded_cut(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT, close_after=6))
    with claude(stack) as c, c.messages.stream(**MSG) as s:
        types = [event.type for event in s]  # no error: the client sees the clean end as sent
    assert "message_stop" not in types and "message_delta" not in types
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("cut", 200)


def test_chat_stream_closed_before_done_is_recorded_cut(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT, close_after=3))
    lines = sse_lines(stack, "/v1/chat/completions", CHAT)
    assert len(lines) == 3 and all('"finish_reason":null' in line for line in lines)
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("cut", 200)


def test_responses_stream_closed_before_response_completed_is_recorded_cut(stack: Stack) -> None:
    stack.emulator.script(Reply(TEXT, close_after=5))
    with gpt(stack) as c:
        events = list(c.responses.create(model="gpt-5", input="hi", stream=True))
    assert len(events) == 5 and events[-1].type != "response.completed"
    [row] = rows(stack)
    assert (row["outcome"], row["status"]) == ("cut", 200)


def test_a_stream_ending_after_its_final_delta_is_still_ok(stack: Stack) -> None:
    """Only ``message_stop`` missing: the SDK has the whole answer, so does the record."""
    stack.emulator.script(Reply(TEXT))
    events = len(sse_lines(stack, "/v1/messages", MSG)) // 2  # an event: line, a data: line
    stack.emulator.script(Reply(TEXT, close_after=events - 1))
    with claude(stack) as c, c.messages.stream(**MSG) as s:
        final = s.get_final_message()
    assert final.stop_reason == "end_turn"
    assert [r["outcome"] for r in rows(stack)] == ["ok", "ok"]


# -- a 200 JSON body that is an error -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "error_type", "status"),
    [
        ("/v1/messages", MSG, "overloaded_error", 529),
        ("/v1/chat/completions", CHAT, "rate_limit_exceeded", 429),
        ("/v1/responses", {"model": "gpt-5", "input": "hi"}, "server_error", 500),
    ],
)
def test_200_json_error_body_is_recorded_upstream_error_with_the_status_the_client_saw(
    stack: Stack, path: str, body: dict[str, Any], error_type: str, status: int
) -> None:
    stack.emulator.script(Reply.failing(error_type, "it failed"))
    r = httpx2.post(stack.url + path, json=body, headers={"x-api-key": "k"})
    assert r.status_code == 200 and "it failed" in r.text  # passed through as sent
    [row] = rows(stack)
    # the client saw 200: so does the row (it used to say ``status``, e.g. 529); the
    # provider's error is in its own column, and a refusal billed nothing
    assert (row["outcome"], row["status"], row["error_type"]) == ("upstream_error", 200, error_type)
    assert row["cost_usd"] == 0.0


# -- the totals ------------------------------------------------------------------------------------


def test_stats_count_failed_and_cut_streams_with_the_usage_they_reported(
    stack: Stack, tmp_path: Path
) -> None:
    stack.emulator.script(
        Reply(TEXT),
        Reply.failing("overloaded_error", "Overloaded", after=5, text=TEXT),
        Reply(TEXT, close_after=6),
    )
    with claude(stack) as c:
        ok = c.messages.create(**MSG, extra_headers={"x-ember-session-id": "s"})
        with (
            pytest.raises(anthropic.APIStatusError),
            c.messages.stream(**MSG, extra_headers={"x-ember-session-id": "s"}) as s,
        ):
            s.until_done()
        with c.messages.stream(**MSG, extra_headers={"x-ember-session-id": "s"}) as s:
            list(s)
    recorded = rows(stack)
    assert [r["outcome"] for r in recorded] == ["ok", "stream_error", "cut"]
    assert recorded[0]["output_tokens"] == ok.usage.output_tokens
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(stack.home)
    result = CliRunner().invoke(cli, ["stats", "--json"], env=env)
    assert result.exit_code == 0, result.output
    [session] = json.loads(result.output)["sessions"]
    assert session["requests"] == 3
    for column in ("input_tokens", "cache_read_tokens", "output_tokens"):
        assert session[column] == sum(r[column] for r in recorded)
    assert session["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in recorded))
    assert session["unpriced_requests"] == 0
