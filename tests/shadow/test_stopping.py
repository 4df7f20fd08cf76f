"""Stopping is not forgetting: a real ``ember proxy`` process with shipped shadow timing (a
session is read once it has been quiet a minute) is stopped right after a session states a
fact — as ``ember wrap``'s proxy is when its agent exits.

- SIGTERM: the proxy reads the session hot before it goes, and the fact is a memory;
- SIGTERM then SIGINT (a second Ctrl-C): the reading is cut short at once, the run is recorded
  cancelled, and the messages stay unread;
- a restarted proxy continues the same session (same generation) and its next run reads what
  was left unread, with nothing read twice;
- a backlog no session comes back for is read cold once another session of the project brings
  credentials.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ember.server import BackgroundServer
from ember.shadow import backlog
from ember.testing import Emulator, Reply
from ember.testing.shadow import shadow_replies
from tests.conftest import StackFactory
from tests.proxy.subprocess_proxy import proxy_process, stop
from tests.shadow.test_e2e import FACT, ask, db_path, rows, wait_for

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

SESSION = "5a5a5a5a-0000-4000-8000-000000000001"
OTHER = "5b5b5b5b-0000-4000-8000-000000000002"
#: Shipped timing but for what a test cannot wait for; memory off keeps the embedder out of it.
ENV = {"EMBER_MEMORY_MODE": "off"}


class _At:
    """Enough of a Stack for ``ask``: a base URL."""

    def __init__(self, url: str) -> None:
        self.url = url


def hanging(answer: Callable[[dict[str, Any], str], Reply | None]) -> Any:
    def reply(body: dict[str, Any], path: str) -> Reply | None:
        found = answer(body, path)
        return None if found is None else Reply(found.text, delay_headers=60)

    return reply


def test_sigterm_reads_the_session_hot_before_the_proxy_goes(tmp_path: Path) -> None:
    emulator = Emulator()
    emulator.reply_fn = shadow_replies()
    home = tmp_path / "home"
    with BackgroundServer(emulator) as up, proxy_process(home, up.url, env=ENV) as (proc, url):
        ask(_At(url), SESSION, [], FACT)  # type: ignore[arg-type]
        started = time.monotonic()
        assert stop(proc, signal.SIGTERM) in (0, -signal.SIGTERM)
        took = time.monotonic() - started
    db = db_path(home)
    [(path, status, trigger)] = rows(db, "SELECT path, status, trigger FROM shadow_memory_runs")
    assert (path, status, trigger) == ("hot", "completed", "stopping")
    assert took < 5 + 3  # shadow_stop_seconds, and the proxy's own flush
    [(content, memory_id)] = rows(db, "SELECT content, memory_id FROM shadow_fact_proposals")
    assert "eu-west-1" in content and memory_id


def test_a_second_ctrl_c_skips_the_reading_and_leaves_the_messages_unread(tmp_path: Path) -> None:
    emulator = Emulator()
    emulator.reply_fn = hanging(shadow_replies())
    home = tmp_path / "home"
    with BackgroundServer(emulator) as up, proxy_process(home, up.url, env=ENV) as (proc, url):
        ask(_At(url), SESSION, [], FACT)  # type: ignore[arg-type]
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: any(b"[ember shadow turn]" in r.body for r in emulator.requests))
        skipped_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
        assert time.monotonic() - skipped_at < 3
    db = db_path(home)
    [(status, error)] = rows(db, "SELECT status, error FROM shadow_memory_runs")
    assert (status, error) == ("cancelled", "interrupted-by-shutdown")
    assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]


def test_a_restarted_proxy_continues_the_session_and_reads_what_was_left_unread(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    emulator.reply_fn = shadow_replies()
    home = tmp_path / "home"
    history: list[dict[str, Any]] = []
    off = {**ENV, "EMBER_SHADOW_STOP_SECONDS": "0"}  # the first proxy leaves its session unread
    with BackgroundServer(emulator) as up:
        with proxy_process(home, up.url, env=off) as (proc, url):
            ask(_At(url), SESSION, history, FACT)  # type: ignore[arg-type]
            stop(proc)
        db = db_path(home)
        assert rows(db, "SELECT COUNT(*) FROM shadow_memory_runs") == [(0,)]
        with proxy_process(home, up.url, env=ENV) as (proc, url):
            ask(_At(url), SESSION, history, "Tests run with pytest -x.")  # type: ignore[arg-type]
            stop(proc)
    assert rows(db, "SELECT DISTINCT generation FROM transcript_messages") == [(1,)]
    [(from_seq, through, trigger)] = rows(
        db, "SELECT from_seq, through_seq, trigger FROM shadow_memory_runs"
    )
    assert trigger == "stopping"
    assert (from_seq, through) == rows(db, "SELECT MIN(seq), MAX(seq) FROM transcript_messages")[0]
    kept = [c for (c,) in rows(db, "SELECT content FROM shadow_fact_proposals")]
    assert any("eu-west-1" in c for c in kept) and any("pytest -x" in c for c in kept)


def test_a_forgotten_backlog_is_read_cold_when_the_project_brings_credentials_again(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose proxy went before reading it, and that never comes back: the next
    session of the project brings credentials, and the backlog is read cold (its prefix is
    long gone) with them. A backlog counts once it has been quiet past the provider's cache
    TTL; the test does not wait five minutes for that."""
    monkeypatch.setattr(backlog, "QUIET_SECONDS", 0.0)
    first = make_stack(stages="features", shadow="primary", shadow_idle_seconds=3600)
    first.emulator.reply_fn = shadow_replies()
    ask(first, SESSION, [], FACT)
    first.settle()
    first.proxy.stop()  # stop_seconds is 0 in tests: it leaves the session unread
    db = db_path(first.home)
    assert rows(db, "SELECT COUNT(*) FROM shadow_memory_runs") == [(0,)]
    second = make_stack(stages="features", shadow="primary", shadow_idle_seconds=3600)
    second.emulator.reply_fn = shadow_replies()
    ask(second, OTHER, [], "Hello there, a new session of the same project.")
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    [(session, path, trigger, model)] = rows(
        db, "SELECT session_id, path, trigger, model FROM shadow_memory_runs"
    )
    assert (session, path, trigger) == (SESSION, "cold", "backlog")
    assert model == "claude-haiku-4-5"  # the light model reads a cold backlog
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"))
