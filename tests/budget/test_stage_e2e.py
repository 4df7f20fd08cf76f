"""Spend limits through the real proxy, the official SDKs and the emulator."""

from __future__ import annotations

import logging

import anthropic
import openai
import pytest

from ember.store.accounting import exchanges
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, run_agent

#: The demo agent's scripted turn is three requests: $0.0102, $0.0044, $0.0020 at the
#: emulator's model's prices. Under this limit before the third, past it after.
LIMIT = 0.015


def ask(stack: Stack) -> anthropic.types.Message:
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=2) as client:
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            system=f"Working directory: {ACME}",
            messages=[{"role": "user", "content": "hello"}],
        )


def test_past_the_daily_limit_requests_are_refused_in_the_providers_shape(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", budget_daily_usd=LIMIT, budget_refuse=True)
    run_agent(stack)  # three requests, about $0.017: past the limit
    forwarded = len(stack.emulator.requests)
    with pytest.raises(anthropic.RateLimitError) as err:
        ask(stack)
    message = err.value.body["error"]["message"]  # type: ignore[index]
    assert "daily limit of $0.0150" in message and "budget_daily_usd" in message
    assert err.value.response.headers["x-should-retry"] == "false"
    assert int(err.value.response.headers["retry-after"]) > 0
    assert len(stack.emulator.requests) == forwarded  # never forwarded, and not retried
    stack.settle()
    [path] = list((stack.home / "projects").glob("*/ember.db"))
    refused = [r for r in exchanges(path) if r["outcome"] == "refused"]
    assert [(r["status"], r["cost_usd"], r["input_tokens"]) for r in refused] == [(429, 0.0, 0)]


def test_an_openai_client_gets_the_refusal_in_openais_shape(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features", budget_daily_usd=0.0, budget_refuse=True)
    with (
        openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=2) as client,
        pytest.raises(openai.RateLimitError, match="daily limit"),
    ):
        client.chat.completions.create(
            model="gpt-5-mini",
            messages=[
                {"role": "system", "content": f"Working directory: {ACME}"},
                {"role": "user", "content": "hi"},
            ],
        )
    assert stack.emulator.requests == []


def test_without_refuse_a_limit_only_warns_once_per_level(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    stack = make_stack(stages="features", budget_daily_usd=LIMIT)
    with caplog.at_level(logging.WARNING, logger="ember.budget.stage"):
        run_agent(stack)
        ask(stack)
        ask(stack)
    warned = [r.getMessage() for r in caplog.records if "daily limit" in r.getMessage()]
    # once on reaching the warning share (80%), once on passing the limit; never refusing
    assert len(warned) == 2 and not any("Refusing" in w for w in warned)
    assert len(stack.emulator.requests) == 5  # all forwarded


def test_a_project_without_limits_is_never_read(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features", budget_projects={"/elsewhere": {"daily_usd": 0}})
    run_agent(stack)
    ask(stack)
    assert len(stack.emulator.requests) == 4


def test_the_dashboard_shows_where_the_project_stands(make_stack: StackFactory) -> None:
    import httpx2 as httpx

    stack = make_stack(stages="features", budget_daily_usd=LIMIT, budget_monthly_usd=1.0)
    run_agent(stack)
    [project] = [
        p for p in httpx.get(f"{stack.url}/ui/api/projects").json() if p["kind"] == "project"
    ]
    got = httpx.get(
        f"{stack.url}/ui/api/f/budget/standing",
        params={"project": project["name"], "identity": project["identity"]},
    ).json()
    day, month = got["limits"]
    assert day["state"] == "over" and month["state"] == "ok"
    assert day["spent_usd"] == pytest.approx(project["usd"], abs=1e-5)
