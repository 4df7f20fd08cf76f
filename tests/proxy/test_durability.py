"""Nothing accepted is lost: a clean stop writes every row, a kill -9 only the last moments.

Run against a real ``ember proxy`` process (signals are the point), with the provider
emulator in this process; loopback only, bounded by the plan's turns and deadlines.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.shaping.recorder import read_state
from ember.shaping.state import ShapingState
from ember.store.driver import connect
from ember.store.registry import Storage
from ember.testing import Emulator
from ember.testing.load import LoadPlan, run_agents
from tests.conftest import StackFactory
from tests.proxy.subprocess_proxy import proxy_process, stop

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/durable-project"
#: How long after its answer a row may still be uncommitted (see store/accounting.py): the
#: writer commits as soon as it is free; the kill -9 test waits this long, no more.
KILL_WINDOW_SECONDS = 0.5


def rows_and_check(home: Path) -> tuple[int, str]:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    conn = connect(ref.db_path(home), readonly=True).conn
    try:
        # the client's own rows: a stopping proxy reads each session once more (shadow
        # memory), and those calls are accounted apart, with their origin
        sql = "SELECT COUNT(*) FROM exchanges WHERE origin = 'client'"
        rows = int(conn.execute(sql).fetchone()[0])
        check = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()
    return rows, check


def shaped_outcomes(home: Path) -> int:
    storage = Storage(home, vec=False)  # after the proxy stopped: the only owner
    try:
        ledger = read_state(ShapingState(home, storage.stats)).ledger
    finally:
        storage.close()
    return sum(s.n for s in ledger.treatment.values())


def test_sigterm_right_after_the_last_answer_loses_no_row_and_no_outcome(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with BackgroundServer(Emulator()) as upstream, proxy_process(home, upstream.url) as (proc, url):
        result = run_agents(url, LoadPlan(agents=6, turns=8, cwd=CWD, deadline_seconds=60))
        assert result.failed == 0, result.errors[:3]
        # uvicorn re-raises the signal once its graceful shutdown is done: -15 is expected.
        assert stop(proc, signal.SIGTERM) in (0, -signal.SIGTERM)
    rows, check = rows_and_check(home)
    assert (rows, check) == (result.answered, "ok")
    assert shaped_outcomes(home) == result.answered


def test_sigint_flushes_like_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with BackgroundServer(Emulator()) as upstream, proxy_process(home, upstream.url) as (proc, url):
        result = run_agents(url, LoadPlan(agents=3, turns=5, cwd=CWD, deadline_seconds=60))
        assert result.failed == 0, result.errors[:3]
        stop(proc, signal.SIGINT)
    assert rows_and_check(home) == (result.answered, "ok")


def test_kill_9_loses_nothing_answered_before_the_last_commit_window(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with BackgroundServer(Emulator()) as upstream, proxy_process(home, upstream.url) as (proc, url):
        result = run_agents(url, LoadPlan(agents=6, turns=8, cwd=CWD, deadline_seconds=60))
        assert result.failed == 0, result.errors[:3]
        time.sleep(KILL_WINDOW_SECONDS)
        proc.kill()
        proc.wait(10)
    rows, check = rows_and_check(home)
    assert check == "ok"
    assert rows == result.answered


def test_the_savings_report_catches_up_without_a_restart(make_stack: StackFactory) -> None:
    """Fewer outcomes than one flush batch (25) still reach the file within seconds."""
    stack = make_stack(stages="features")
    result = run_agents(stack.url, LoadPlan(agents=2, turns=5, cwd=CWD, deadline_seconds=60))
    assert result.failed == 0
    deadline = time.monotonic() + 10
    while shaped_outcomes(stack.home) < result.answered and time.monotonic() < deadline:
        time.sleep(0.2)
    assert shaped_outcomes(stack.home) == result.answered == 10
