"""A team's proxy on a bad day, as users run it: the official Anthropic SDK through the real
proxy onto a PostgreSQL store that is down at start, goes away under the load of four agents,
or stays down across a stop or a kill -9 of the proxy. Every answered request ends up in the
store once — its accounting row, its memory ledger row and its two transcript messages — and
the log says each change of the server once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from ember.compose import build_storage
from ember.config import load_settings
from ember.project import ProjectRef
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow import promote_later
from ember.shadow.runner import ShadowRunner
from ember.shadow.stage import ShadowStage
from ember.store.journal import journal_dir
from ember.store.pg import pool, watch
from ember.store.pg.names import schema_name
from ember.testing import Emulator
from ember.testing.shadow import shadow_replies
from tests.conftest import StackFactory
from tests.proxy.subprocess_proxy import proxy_process, stop
from tests.shadow.test_stage_order import PROJECT, exchange, outcome, services
from tests.store.pg.relay import Relay

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytestmark = pytest.mark.fault

ACME = ProjectRef("acme", "header:x-ember-project-id")
#: what each answered turn leaves in the project's schema
PER_TURN = {"exchanges": 1, "memory_injections": 1, "transcript_messages": 2}
#: shadow memory on (it records the transcript) but never reading within a test
SHADOW = {
    "EMBER_SHADOW": "primary",
    "EMBER_SHADOW_IDLE_SECONDS": "3600",
    "EMBER_SHADOW_STOP_SECONDS": "0",
}


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(Emulator()) as up:
        yield up.url


def _turns(url: str, session: str, n: int, pause: float = 0.0) -> int:
    """``n`` turns of one conversation; the number answered (the SDK never retries)."""
    history: list[dict[str, Any]] = []
    answered = 0
    with anthropic.Anthropic(
        base_url=url, api_key="k", max_retries=0, default_headers={"x-ember-project-id": "acme"}
    ) as client:
        for i in range(n):
            history.append({"role": "user", "content": f"step {i} of {session}: which port?"})
            msg = client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=64,
                messages=history,  # type: ignore[arg-type]
                extra_headers={"x-ember-session-id": session},
                timeout=30,
            )
            history.append({"role": "assistant", "content": msg.content[0].text})  # type: ignore[union-attr]
            answered += 1
            time.sleep(pause)
    return answered


def _counts(pg_url: str, home: Path) -> dict[str, dict[str, int]]:
    """Rows per session of each table of ``PER_TURN`` in acme's schema."""
    schema = schema_name(home, ACME.db_path(home))
    out: dict[str, dict[str, int]] = {}
    with psycopg.connect(pg_url) as conn:
        for table in PER_TURN:
            there = conn.execute("SELECT to_regclass(%s)", (f"{schema}.{table}",)).fetchone()
            if there is None or there[0] is None:  # not made yet (migrations run one by one)
                out[table] = {}
                continue
            rows = conn.execute(f"SELECT session_id, COUNT(*) FROM {schema}.{table} GROUP BY 1")
            out[table] = {str(s): int(n) for s, n in rows}
    return out


def _expected(answered: dict[str, int]) -> dict[str, dict[str, int]]:
    return {t: {s: n * k for s, n in answered.items()} for t, k in PER_TURN.items()}


def _wait_for(what: Callable[[], Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.2)


def _complaints(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r" (WARNING|ERROR|CRITICAL) ", line)]


def test_a_proxy_started_while_the_server_is_down_serves_and_delivers_everything_later(
    tmp_path: Path, pg_url: str, server: Relay, upstream: str
) -> None:
    server.close()
    env = {"EMBER_STORE_URL": server.url(), **SHADOW}
    with proxy_process(tmp_path, upstream, env=env) as (proc, url):
        answered = {f"down-{i}": _turns(url, f"down-{i}", 3) for i in range(2)}
        assert answered == {"down-0": 3, "down-1": 3}  # served, with the store down
        health = httpx2.get(url + "/healthz").json()
        assert {h["state"] for h in health["storage"]} == {"unreachable"}
        server.open()
        _wait_for(lambda: _counts(pg_url, tmp_path) == _expected(answered))
        _wait_for(lambda: httpx2.get(url + "/healthz").json() == {"status": "ok"}, 20)
        assert stop(proc) in (0, -signal.SIGTERM)  # uvicorn's exit on SIGTERM
        said = proc.stderr.read().decode() if proc.stderr else ""
    assert len(_complaints(said)) <= 8, said
    assert "unreachable" in said and "back after" in said


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_proxy_stopped_or_killed_while_holding_loses_nothing(
    tmp_path: Path, pg_url: str, server: Relay, upstream: str, how: str
) -> None:
    server.close()
    env = {"EMBER_STORE_URL": server.url(), **SHADOW}
    with proxy_process(tmp_path, upstream, env=env) as (proc, url):
        answered = {f"held-{i}": _turns(url, f"held-{i}", 2) for i in range(3)}
        time.sleep(0.3)  # the response stages of the last answer have run
        stop(proc, signal.SIGTERM if how == "stopped" else signal.SIGKILL)
    assert sorted(journal_dir(tmp_path).glob("writes-*")), "nothing was kept"
    server.open()
    with proxy_process(tmp_path, upstream, env=env) as (proc, url):
        _wait_for(lambda: _counts(pg_url, tmp_path) == _expected(answered))
        health = httpx2.get(url + "/healthz").json()
        assert health == {"status": "ok"}  # no answer of the earlier run is missing
        time.sleep(1.0)  # nothing arrives twice later
        assert _counts(pg_url, tmp_path) == _expected(answered)
    assert not sorted(journal_dir(tmp_path).glob("writes-*"))


def test_an_outage_under_four_agents_costs_no_row_and_few_lines(
    make_stack: StackFactory,
    pg_url: str,
    server: Relay,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two agents are mid-conversation when the server goes; two begin theirs while it is
    gone (their threads are placed by their own writes once it is back)."""
    monkeypatch.setattr(watch, "PROBE_SECONDS", 0.5)
    monkeypatch.setattr(pool, "WAIT_SECONDS", 1.0)  # an outage longer than a borrow's wait
    caplog.set_level(logging.INFO)
    stack = make_stack(
        stages="features", store_url=server.url(), shadow="primary", shadow_idle_seconds=3600
    )
    outage = threading.Event()
    back = threading.Event()

    def agent(session: str) -> int:
        if session.startswith("late"):
            outage.wait(30)
        return _turns(stack.url, session, 8, pause=0.15)

    sessions = ["early-0", "early-1", "late-0", "late-1"]
    with concurrent.futures.ThreadPoolExecutor(4) as agents:
        futures = {s: agents.submit(agent, s) for s in sessions}
        time.sleep(0.6)
        server.close()
        outage.set()
        time.sleep(4.0)
        server.open()
        back.set()
        answered = {s: f.result(120) for s, f in futures.items()}
    assert answered == dict.fromkeys(sessions, 8)  # the outage cost no answer
    _wait_for(lambda: _counts(pg_url, stack.home) == _expected(answered))
    _wait_for(lambda: stack.app.storage.problems() == [], 20)
    _wait_for(lambda: "back after" in caplog.text, 20)
    complaints = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(complaints) <= 8, [r.getMessage() for r in complaints]
    assert len([r for r in complaints if "unreachable" in r.getMessage()]) == 1


def _every_ask(lines: Any, session: str) -> list[dict[str, Any]]:
    """The model's side of a shadow read: each ask of the user is a fact, with its message."""
    return [
        {"content": f"The user asked: {line.text} [{session[:8]}]",
         "evidence": [{"kind": "user-stated", "messageId": line.id}]}
        for line in lines if line.kind == "user"
    ]  # fmt: skip


def test_sessions_that_spoke_only_while_the_server_was_down_are_read_by_shadow_later(
    make_stack: StackFactory, pg_url: str, server: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their threads could not be placed (no lineage could be read) and their shadow runs
    were refused: once the server is back each is placed, read once, and its asks proposed."""
    monkeypatch.setattr(watch, "PROBE_SECONDS", 0.5)
    emulator = Emulator()
    emulator.reply_fn = shadow_replies(_every_ask)
    server.close()
    stack = make_stack(
        stages="features", store_url=server.url(), emulator=emulator, shadow="primary",
        shadow_idle_seconds=0.5, shadow_tick_seconds=0.2,
    )  # fmt: skip
    sessions = [f"dark-{i}" for i in range(3)]
    with concurrent.futures.ThreadPoolExecutor(3) as agents:
        done = list(agents.map(lambda s: _turns(stack.url, s, 4), sessions))
    answered = dict(zip(sessions, done, strict=True))
    time.sleep(1.5)  # their shadow runs come due, and are refused
    server.open()
    _wait_for(lambda: _counts(pg_url, stack.home) == _expected(answered))
    schema = schema_name(stack.home, ACME.db_path(stack.home))

    def read() -> dict[str, int]:
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute(
                f"SELECT p.session_id, COUNT(*) FROM {schema}.shadow_fact_proposals p "
                "WHERE p.validation_error IS NULL GROUP BY 1"
            )
            return {str(s): int(n) for s, n in rows}

    _wait_for(lambda: read() == dict.fromkeys(sessions, 4), 60)  # each ask proposed once


def test_facts_a_run_found_as_the_server_went_away_become_memories_once_it_is_back(
    make_stack: StackFactory, pg_url: str, server: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's proposals are written, then the server goes before its facts are stored
    as memories: the run is complete and its messages are never read again, so the facts are
    stored when the server is back — each once, each proposal linked to its memory."""
    monkeypatch.setattr(watch, "PROBE_SECONDS", 0.5)
    monkeypatch.setattr(pool, "WAIT_SECONDS", 1.0)  # an outage longer than a borrow's wait
    monkeypatch.setattr(promote_later, "POLL_SECONDS", 0.1)
    emulator = Emulator()
    emulator.reply_fn = shadow_replies(_every_ask)
    promote_now = ShadowRunner._promote_now
    cut: list[str] = []

    async def server_goes_first(self: ShadowRunner, *args: Any) -> list[str]:
        if not cut:
            cut.append("cut")
            server.close()  # the proposals are in; the memories not yet
        return await promote_now(self, *args)

    monkeypatch.setattr(ShadowRunner, "_promote_now", server_goes_first)
    stack = make_stack(
        stages="features", store_url=server.url(), emulator=emulator, shadow="primary",
        shadow_idle_seconds=0.5, shadow_tick_seconds=0.2,
    )  # fmt: skip
    assert _turns(stack.url, "quiet-0", 3) == 3
    schema = schema_name(stack.home, ACME.db_path(stack.home))

    def proposals() -> list[tuple[str, str | None]]:
        with psycopg.connect(pg_url) as conn:  # the server itself: up all along
            there = conn.execute("SELECT to_regclass(%s)", (f"{schema}.shadow_fact_proposals",))
            if there.fetchone()[0] is None:  # type: ignore[index]
                return []
            rows = conn.execute(
                f"SELECT p.content, p.memory_id FROM {schema}.shadow_fact_proposals p "
                "WHERE p.validation_error IS NULL ORDER BY p.content"
            )
            return [(str(c), m) for c, m in rows]

    _wait_for(lambda: len(proposals()) == 3)
    time.sleep(2.5)  # the promotion met the server gone, and gave up waiting for it
    assert cut and [m for _, m in proposals()] == [None] * 3
    server.open()
    _wait_for(lambda: all(m is not None for _, m in proposals()), 30)
    with psycopg.connect(pg_url) as conn:
        memories = conn.execute(
            f"SELECT id, content FROM {schema}.memories WHERE metadata::jsonb ->> 'source' = "
            "'shadow'"
        ).fetchall()
    assert sorted(str(c) for _, c in memories) == [c for c, _ in proposals()]  # each once
    assert {str(i) for i, _ in memories} == {str(m) for _, m in proposals()}


async def test_a_turn_is_journaled_while_the_default_worker_threads_wait_on_the_store(
    tmp_path: Path, pg_url: str
) -> None:
    """Each read waits for a connection until an outage is known (seconds), on the event
    loop's default worker threads: all of them can be waiting at once. A turn's messages
    must still reach the journal at once, not behind them — a kill then lost answered
    turns' transcripts."""
    settings = load_settings(env={}, home=tmp_path, shadow="primary", store_url=pg_url)
    storage = build_storage(settings)
    stage = ShadowStage(settings)
    upstream = Upstream.from_settings(settings)
    await stage.start(services(settings, storage, upstream))
    first = [{"role": "user", "content": "which port does the api listen on?"}]
    second = [*first, {"role": "assistant", "content": "8080"}, {"role": "user", "content": "why?"}]
    ex1 = exchange(first, settings, "busy-0")
    await stage.on_request(ex1)
    await stage.on_response(ex1, outcome("8080"))  # the thread is placed
    loop = asyncio.get_running_loop()
    stuck = threading.Event()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))
    waiting = loop.run_in_executor(None, stuck.wait, 30)  # its only thread waits
    try:
        ex2 = exchange(second, settings, "busy-0")
        await stage.on_request(ex2)
        answered = asyncio.ensure_future(stage.on_response(ex2, outcome("it is the default")))
        schema = schema_name(tmp_path, PROJECT.db_path(tmp_path))

        def messages() -> int:
            with psycopg.connect(pg_url) as conn:
                sql = f"SELECT COUNT(*) FROM {schema}.transcript_messages"
                return int(conn.execute(sql).fetchone()[0])  # type: ignore[index]

        deadline = time.monotonic() + 5
        while messages() < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert messages() == 4  # written while every default worker thread was busy
    finally:
        stuck.set()
        await waiting
    await answered
    assert stage.service is not None
    await stage.service.tasks.cancel_all()
    await upstream.close()
    storage.close()
