"""Every shadow call is priced when its model has a price, and the budget stays in dollars.

The OpenAI SDK's default streaming Chat request (``stream=True``, no ``stream_options``) gets
no usage back; a shadow fork of it asked the same way was recorded with 0 tokens at no cost,
``ember stats`` said "unknown" for the shadow, and the budget fell back to weighted tokens
"because a model has no price" though gpt-5 has one. Through the real proxy and the official
``openai`` SDK, against the emulator (which streams usage only when asked, as OpenAI does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from ember.config import load_settings
from ember.project import resolve_project
from ember.protocols import OPENAI_CHAT
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow.calls import call
from ember.testing import Emulator
from ember.testing.agent import system_prompt
from ember.testing.replies import Reply
from ember.testing.shadow import shadow_path, shadow_replies
from tests.cli.commands import clean_env, run
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import rows, wait_for

CWD = "/home/dev/chat-project"
SESSION = "chat-session-1"


def chat_turns(stack: Stack, *texts: str) -> None:
    """A session as the SDK's default streaming Chat request makes it: no stream_options."""
    messages: list[Any] = [{"role": "system", "content": system_prompt(CWD)}]
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0) as client:
        for text in texts:
            messages.append({"role": "user", "content": text})
            stream = client.chat.completions.create(
                model="gpt-5",
                messages=messages,
                stream=True,
                extra_headers={"x-ember-session-id": SESSION},
            )
            said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            messages.append({"role": "assistant", "content": said})


def db_path(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def a_session_read(stack: Stack) -> Path:
    """Two turns (the first long enough to be cached), then the shadow's read of them."""
    chat_turns(
        stack,
        "Let me tell you about this repo. " * 60,
        "Remember: releases deploy to eu-west-1 through the deploy workflow on tags.",
    )
    db = db_path(stack.home)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE finished_at IS NOT NULL"))
    stack.settle()
    return db


def stats(stack: Stack, *args: str) -> str:
    result = run(["stats", "--cwd", CWD, *args], clean_env(stack.home, EMBER_SHADOW="primary"))
    assert result.code == 0, result.stderr
    return result.stdout


@pytest.fixture
def shadowed(make_stack: StackFactory) -> Stack:
    # A share of 1: two turns are a short session, and a shadow run costs about one turn.
    return make_stack(stages="features", shadow="primary", shadow_max_share=1.0)


def test_a_hot_read_of_the_sdks_default_chat_stream_has_tokens_and_a_cost(
    shadowed: Stack,
) -> None:
    stack = shadowed
    stack.emulator.reply_fn = shadow_replies()
    db = a_session_read(stack)
    assert rows(db, "SELECT path, status FROM shadow_memory_runs") == [("hot", "completed")]
    [fork] = [r for r in stack.emulator.requests if shadow_path(json.loads(r.body)) == "hot"]
    assert json.loads(fork.body)["stream_options"] == {"include_usage": True}
    [(read, fresh, output, cost, estimated)] = rows(
        db,
        "SELECT cache_read_tokens, input_tokens, output_tokens, cost_usd, usage_estimated "
        "FROM exchanges WHERE origin = 'shadow'",
    )
    # the provider's own counters: the session's prefix read from the cache, priced
    assert read > 0 and fresh > 0 and output > 0 and estimated == 0
    assert cost is not None and cost > 0
    # what the client saw is untouched: its stream asked for no usage and got none
    client_rows = rows(db, "SELECT usage_estimated FROM exchanges WHERE origin = 'client'")
    assert client_rows == [(1,), (1,)]

    report = json.loads(stats(stack, "--json"))
    [shadow] = [o for o in report["ember_spend"] if o["origin"] == "shadow"]
    assert shadow["cost_usd"] == pytest.approx(cost)
    assert report["shadow_budget"]["unit"] == "usd"
    assert report["shadow_budget"]["spent"] == pytest.approx(cost)
    text = stats(stack)
    assert f"${cost:.4f}" in text and "unknown" not in text
    assert "weighted tokens" not in text and "shadow memory, last 7 days: spent $" in text


def test_a_read_the_provider_refuses_costs_nothing_and_the_budget_stays_in_dollars(
    shadowed: Stack,
) -> None:
    """A 429 bills nothing: recorded as $0 at gpt-5's price, not an unknown cost that
    counted the project's whole week in weighted tokens."""
    stack = shadowed
    answer = shadow_replies()

    def refused(body: dict[str, Any], path: str) -> Reply | None:
        if shadow_path(body) is not None:
            return Reply.error(429, "Rate limit reached for gpt-5", "rate_limit_exceeded")
        return answer(body, path)

    stack.emulator.reply_fn = refused
    db = a_session_read(stack)
    assert rows(db, "SELECT status FROM shadow_memory_runs") == [("failed",)]
    assert rows(db, "SELECT status, cost_usd FROM exchanges WHERE origin = 'shadow'") == [
        (429, 0.0)
    ]
    budget = json.loads(stats(stack, "--json"))["shadow_budget"]
    assert budget["unit"] == "usd" and budget["spent"] == 0.0 and budget["clients"] > 0


async def test_a_whole_answer_without_usage_is_estimated_and_priced(tmp_path: Path) -> None:
    """A server that ignores include_usage streams none: the call is estimated, marked as
    such, and priced, never 0 tokens at an unknown cost."""
    emulator = Emulator()
    with BackgroundServer(emulator) as up:
        settings = load_settings(env={}, home=tmp_path, openai_url=up.url + "/v1")
        upstream = Upstream.from_settings(settings)
        said = "Remember: tabs in Makefiles. " * 40
        body = orjson.dumps(
            {"model": "gpt-5", "stream": True, "messages": [{"role": "user", "content": said}]}
        )
        try:
            result = await call(
                upstream,
                OPENAI_CHAT,
                up.url + "/v1/chat/completions",
                [("authorization", "Bearer sk-test")],
                body,
                "gpt-5",
                settings.price_table(),
            )
        finally:
            await upstream.close()
    assert result.ok and result.answer is not None and result.answer.usage is None
    assert result.estimated and result.tokens is not None
    assert result.tokens.input_tokens > len(said) // 5 and result.tokens.output_tokens > 0
    assert result.usage.usd is not None and result.usage.usd > 0
