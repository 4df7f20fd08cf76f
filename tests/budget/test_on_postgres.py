"""Spend limits on a PostgreSQL store (``store_url``, issue #24): the spend is read from the
project's schema (there is never a project file), so a limit stops or warns as on SQLite —
and a proxy started after the money was spent, by another proxy or before a restart, sees
it."""

from __future__ import annotations

import logging
from pathlib import Path

import anthropic
import pytest

from ember.store.pg.database import PgDatabase
from ember.store.schema import PROJECT, for_postgres
from tests.budget.test_stage_e2e import LIMIT, ask
from tests.conftest import StackFactory
from tests.memory.test_stage_e2e import run_agent

pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def _refused(pg_url: str, home: Path) -> list[tuple[int, float, int]]:
    """(status, cost, input tokens) of the refused rows in the one project's schema."""
    [schema] = _project_schemas(pg_url)
    db = PgDatabase(home / "ember.db", for_postgres(PROJECT), url=pg_url, schema_name=schema)
    try:
        rows = db.read(
            lambda c: c.execute(
                "SELECT status, cost_usd, input_tokens FROM exchanges WHERE outcome = 'refused'"
            ).fetchall()
        )
    finally:
        db.close()
    return [tuple(r) for r in rows]


def _project_schemas(pg_url: str) -> list[str]:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember_p_%'"
        ).fetchall()
    return [r[0] for r in rows]


def test_past_the_daily_limit_requests_are_refused(
    make_stack: StackFactory, pg_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    stack = make_stack(
        stages="features", budget_daily_usd=LIMIT, budget_refuse=True, store_url=pg_url
    )
    run_agent(stack)  # three requests, about $0.017: past the limit
    forwarded = len(stack.emulator.requests)
    with pytest.raises(anthropic.RateLimitError, match=r"daily limit of \$0\.0150"):
        ask(stack)
    assert len(stack.emulator.requests) == forwarded
    stack.settle()
    assert _refused(pg_url, home) == [(429, 0.0, 0)]
    assert not (home / "projects").exists()  # no file: the spend came from the schema


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_proxy_started_later_sees_what_was_already_spent(
    make_stack: StackFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    """The second proxy has no spend of its own in memory: only the stored rows can stop it
    (on PostgreSQL a check for the project's file found none, and every project read as
    having spent nothing)."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    kw = {"budget_daily_usd": LIMIT, "budget_refuse": True, "store_url": url}
    first = make_stack(stages="features", **kw)
    run_agent(first)
    first.settle()
    second = make_stack(stages="features", **kw)
    with pytest.raises(anthropic.RateLimitError, match="daily limit"):
        ask(second)
    assert second.emulator.requests == []


def test_without_refuse_a_limit_only_warns_once_per_level(
    make_stack: StackFactory, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    stack = make_stack(stages="features", budget_daily_usd=LIMIT, store_url=pg_url)
    with caplog.at_level(logging.WARNING, logger="ember.budget.stage"):
        run_agent(stack)
        ask(stack)
        ask(stack)
    warned = [r.getMessage() for r in caplog.records if "daily limit" in r.getMessage()]
    assert len(warned) == 2 and not any("Refusing" in w for w in warned)
    assert len(stack.emulator.requests) == 5  # all forwarded


def test_a_new_project_is_not_refused(make_stack: StackFactory, pg_url: str) -> None:
    stack = make_stack(
        stages="features", budget_daily_usd=LIMIT, budget_refuse=True, store_url=pg_url
    )
    assert _project_schemas(pg_url) == []
    ask(stack)  # nothing spent yet (no schema): forwarded
    assert len(stack.emulator.requests) == 1
