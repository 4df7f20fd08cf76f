"""The real proxy with ``store_url`` set (issue #24): accounting goes to the project's schema,
``ember stats`` reads the numbers SQLite gives for the same traffic, two proxies on one project
lose and double nothing, and a server that goes away costs no answer. Requests come from the
official SDKs through the provider emulator, as a user's agent sends them."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember.project import ProjectRef
from ember.store.pg.names import schema_name
from ember.store.schema import PG_PROJECT
from tests.conftest import StackFactory
from tests.store.pg.relay import relay

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

EMBER = str(Path(sys.executable).with_name("ember"))
PASSWORD = "s3cret-in-the-url"
ACME = ProjectRef("acme", "header:x-ember-project-id")


def _anthropic_turns(url: str, session: str, n: int, project: str = "acme") -> int:
    history: list[dict[str, Any]] = []
    with anthropic.Anthropic(
        base_url=url, api_key="k", max_retries=0, default_headers={"x-ember-project-id": project}
    ) as client:
        for i in range(n):
            history.append({"role": "user", "content": f"step {i} of {session}"})
            msg = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                messages=history,  # type: ignore[arg-type]
                extra_headers={"x-ember-session-id": session},
            )
            history.append({"role": "assistant", "content": msg.content[0].text})  # type: ignore[union-attr]
    return n


def _openai_turns(url: str, session: str) -> int:
    headers = {"x-ember-project-id": "acme", "x-ember-session-id": session}
    with openai.OpenAI(
        base_url=url + "/v1", api_key="k", max_retries=0, default_headers=headers
    ) as client:
        client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "a"}])
        chunks = client.chat.completions.create(
            model="gpt-5",
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "b"}],
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        client.responses.create(model="gpt-5", input="c")
    return 3


def _schema(home: Path) -> str:
    return schema_name(home, ACME.db_path(home))


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql)]  # type: ignore[call-overload]


def _stats(home: Path, store_url: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(home)
    if store_url is not None:
        env["EMBER_STORE_URL"] = store_url
    done = subprocess.run(
        [EMBER, "stats", "--project-id", "acme", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _numbers(report: dict[str, Any]) -> dict[str, Any]:
    """What a user reads in ``ember stats``, less the wall-clock times of the requests."""
    sessions = {
        s["session_id"]: {k: v for k, v in s.items() if k not in ("first_seen", "last_seen")}
        for s in report["sessions"]
    }
    return {
        "sessions": sessions,
        "ember_spend": report["ember_spend"],
        "memory_asks": report["memory_asks"],  # memory runs on PostgreSQL: its ledger too
        "shadow_budget": report["shadow_budget"],  # and shadow memory: its spend window
    }


def test_accounting_lands_in_the_projects_schema_and_stats_reads_what_sqlite_reads(
    make_stack: StackFactory, tmp_path: Path, pg_url: str
) -> None:
    reports = {}
    for backend, url in (("sqlite", None), ("postgres", pg_url)):
        home = tmp_path / backend
        stack = make_stack(home=home, store_url=url)
        answered = _anthropic_turns(stack.url, "sess-claude", 3) + _openai_turns(stack.url, "s-oai")
        stack.settle()
        reports[backend] = _stats(home, url)
    rows = _query(pg_url, f"SELECT session_id FROM {_schema(tmp_path / 'postgres')}.exchanges")
    assert len(rows) == answered == 6  # one row per answered request, in acme's schema
    assert _query(pg_url, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember_%'") == [
        (_schema(tmp_path / "postgres"),)
    ]
    assert not (tmp_path / "postgres" / "projects").exists()  # no file was made for it
    got, expected = _numbers(reports["postgres"]), _numbers(reports["sqlite"])
    assert got == expected
    assert got["sessions"]["sess-claude"]["requests"] == 3
    assert got["sessions"]["s-oai"]["requests"] == 3
    assert got["sessions"]["sess-claude"]["cost_usd"] > 0
    assert reports["postgres"]["db"].startswith(
        f"PostgreSQL schema {_schema(tmp_path / 'postgres')}"
    )


def test_two_proxies_on_one_project_lose_and_double_nothing(
    make_stack: StackFactory, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    one, two = make_stack(store_url=pg_url), make_stack(store_url=pg_url)
    jobs = [(stack, f"{i}-{n}") for n, stack in enumerate((one, two)) for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        sent = sum(pool.map(lambda job: _anthropic_turns(job[0].url, f"par-{job[1]}", 4), jobs))
    one.settle()
    two.settle()
    schema = _schema(one.home)
    per_session = _query(
        pg_url, f"SELECT session_id, COUNT(*) FROM {schema}.exchanges GROUP BY 1 ORDER BY 1"
    )
    assert sent == 64 and per_session == sorted((f"par-{j}", 4) for _, j in jobs)
    assert _query(pg_url, f"SELECT SUM(calls) FROM {schema}.spend_hours") == [(64,)]
    migrations = _query(pg_url, f"SELECT name FROM {schema}._migrations")
    assert len(migrations) == len(set(migrations)) == len(PG_PROJECT.migrations)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_projects_never_see_each_others_rows(make_stack: StackFactory, pg_url: str) -> None:
    stack = make_stack(store_url=pg_url)
    _anthropic_turns(stack.url, "acme-session", 2, project="acme")
    _anthropic_turns(stack.url, "beta-session", 1, project="beta")
    stack.settle()
    beta = ProjectRef("beta", "header:x-ember-project-id")
    acme_db = stack.app.storage.database(ACME.db_path(stack.home))
    beta_db = stack.app.storage.database(beta.db_path(stack.home))
    sql = "SELECT session_id, COUNT(*) FROM exchanges GROUP BY 1"
    assert acme_db.read(lambda c: [tuple(r) for r in c.execute(sql)]) == [("acme-session", 2)]
    assert beta_db.read(lambda c: [tuple(r) for r in c.execute(sql)]) == [("beta-session", 1)]


def test_the_features_run_on_postgres_and_requests_flow(
    make_stack: StackFactory, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    stack = make_stack(stages="features", store_url=pg_url)
    names = {s.name for s in stack.app.pipeline.stages}  # type: ignore[attr-defined]
    # every feature the settings turn on (shadow memory is off in these tests)
    assert names == {"accounting", "shaping", "memory", "compress", "traffic", "toin"}
    _anthropic_turns(stack.url, "with-features", 2)
    stack.settle()
    assert _query(pg_url, f"SELECT COUNT(*) FROM {_schema(stack.home)}.exchanges") == [(2,)]
    # output shaping's savings went to the store's ember_home, not to a stats.db
    assert _query(pg_url, "SELECT name FROM ember_home.shaping_state WHERE name = 'ledger'")
    assert not (stack.home / "stats.db").exists()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_server_that_goes_away_costs_no_answer_and_its_rows_arrive_later(
    make_stack: StackFactory, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ember")
    with relay(pg_url) as server:
        stack = make_stack(store_url=server.url(PASSWORD))
        _anthropic_turns(stack.url, "before", 1)
        stack.settle()
        server.close()
        started = time.monotonic()
        during = sum(_anthropic_turns(stack.url, f"down-{i}", 2) for i in range(3))
        assert time.monotonic() - started < 10  # answered: accounting never waited
        deadline = time.monotonic() + 30
        while "storage" not in httpx2.get(stack.url + "/healthz").json():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        health = httpx2.get(stack.url + "/healthz").text
        assert "unreachable" in health and "ember@127.0.0.1" in health
        metrics = httpx2.get(stack.url + "/metrics").text
        assert 'ember_storage_problems{state="unreachable"} 1.0' in metrics
        server.open()
        after = _anthropic_turns(stack.url, "after", 2)
        schema = _schema(stack.home)
        want = 1 + during + after
        while _query(pg_url, f"SELECT COUNT(*) FROM {schema}.exchanges") != [(want,)]:
            assert time.monotonic() < deadline + 30, "held rows did not arrive"
            time.sleep(0.2)
        assert httpx2.get(stack.url + "/healthz").json() == {"status": "ok"}
    said = [r.getMessage() for r in caplog.records if r.name.startswith("ember")]
    assert len([m for m in said if "unreachable" in m and "holding writes" in m]) == 1
    assert PASSWORD not in caplog.text + health
