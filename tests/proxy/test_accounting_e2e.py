"""Per-session accounting through the real proxy."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import anthropic
import httpx2

from ember.project import resolve_project
from ember.store.accounting import exchanges, session_totals
from tests.conftest import Stack

SYSTEM = [
    {
        "type": "text",
        "text": "You are a careful engineer. " * 400,
        "cache_control": {"type": "ephemeral"},
    }
]


def _turns(client: anthropic.Anthropic, session: str, n: int) -> list[Any]:
    history: list[dict[str, Any]] = []
    usages = []
    for i in range(n):
        history.append({"role": "user", "content": f"step {i} of {session}"})
        msg = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=128,
            system=SYSTEM,  # type: ignore[arg-type]
            messages=history,
            extra_headers={"x-ember-session-id": session},
        )
        history.append({"role": "assistant", "content": msg.content[0].text})  # type: ignore[union-attr]
        usages.append(msg.usage)
    return usages


def test_session_totals_match_what_the_sdk_saw(stack: Stack) -> None:
    with anthropic.Anthropic(
        base_url=stack.url,
        api_key="k",
        max_retries=0,
        default_headers={"x-ember-project-id": "acme"},
    ) as c:
        usages = _turns(c, "sess-1", 3)
    stack.settle()
    db = resolve_project({"x-ember-project-id": "acme"}).db_path(stack.home)  # type: ignore[union-attr]
    [total] = session_totals(db)
    assert total["session_id"] == "sess-1" and total["requests"] == 3
    assert total["cache_read_tokens"] == sum(u.cache_read_input_tokens for u in usages) > 0
    assert total["cache_write_tokens"] == sum(u.cache_creation_input_tokens for u in usages) > 0
    assert total["output_tokens"] == sum(u.output_tokens for u in usages)
    assert total["cost_usd"] is not None and total["cost_usd"] > 0
    assert not (stack.home / "stats.db").exists()  # the project's own file, not the global one


def test_unknown_model_cost_is_null(stack: Stack) -> None:
    httpx2.post(
        stack.url + "/v1/chat/completions",
        json={"model": "my-local-llm", "messages": [{"role": "user", "content": "x"}]},
    )
    stack.settle()
    [row] = exchanges(stack.home / "stats.db")
    assert row["model"] == "my-local-llm" and row["cost_usd"] is None
    assert row["output_tokens"] > 0


def test_concurrent_sessions_are_kept_apart(stack: Stack) -> None:
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        concurrent.futures.ThreadPoolExecutor(12) as pool,
    ):
        results = list(pool.map(lambda i: _turns(c, f"par-{i}", 3), range(12)))
    stack.settle()
    totals = {r["session_id"]: r for r in session_totals(stack.home / "stats.db")}
    assert set(totals) == {f"par-{i}" for i in range(12)}
    for i, usages in enumerate(results):
        t = totals[f"par-{i}"]
        assert t["requests"] == 3
        assert t["output_tokens"] == sum(u.output_tokens for u in usages)
        # Every session reads the shared system prefix from the second turn on.
        assert usages[1].cache_read_input_tokens > 0
