"""Soak: several agents at once on one project with memory on, round after round.

Before the storage rewrite this setup corrupted the project file in 5 of 6 runs ("database disk
image is malformed", "row missing from index sqlite_autoindex_memory_injections_1") and lost
accounting rows silently. Each round must leave the file intact (``PRAGMA integrity_check``) and
hold exactly one accounting row per answered request, and one ledger entry per new ask.
Bounded: a fixed number of turns, a client timeout and a deadline; loopback only.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from bench.support.load import LoadPlan, LoadResult, run_agents

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.testing import Emulator
from tests.conftest import StackFactory
from tests.proxy.subprocess_proxy import proxy_process, stop

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/soak-project"
FACTS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]


def project_db(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def seed(db: Path) -> None:
    with HierarchicalMemory(db, get_embedder()) as mem:
        for fact in FACTS:
            mem.add(fact, importance=0.8)


def inspect(db: Path) -> tuple[str, int, int]:
    """(integrity_check, accounting rows, ledger entries), read like any other process would."""
    conn = connect(db, readonly=True).conn
    try:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        # the clients' own rows (a stopping proxy's shadow reads are accounted apart)
        rows = conn.execute("SELECT COUNT(*) FROM exchanges WHERE origin = 'client'").fetchone()[0]
        ledger = conn.execute("SELECT COUNT(*) FROM memory_injections").fetchone()[0]
    finally:
        conn.close()
    return str(check), int(rows), int(ledger)


def test_four_agents_round_after_round_never_corrupt_or_drop_a_row(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features")
    db = project_db(stack.home)
    seed(db)
    get_embedder()  # the proxy shares the loaded model: every ask is answered with memory
    answered = asks = 0
    for round_ in range(3):
        plan = LoadPlan(agents=4, turns=12, cwd=CWD, session_prefix=f"round{round_}")
        result = run_agents(stack.url, plan)
        assert result.failed == 0, result.errors[:3]
        stack.settle()
        answered += result.answered
        asks += result.asks
        check, rows, ledger = inspect(db)
        assert check == "ok", f"round {round_}: {check}"
        assert rows == answered, f"round {round_}: {rows} rows for {answered} answers"
        assert ledger == asks, f"round {round_}: {ledger} ledger entries for {asks} asks"
    injected = sum(b"<ember-memory>" in r.body for r in stack.emulator.requests)
    assert injected > 0  # memory really was on the path under load


def warm_up(url: str, emulator: Emulator) -> int:
    """Ask until the proxy's embedder has loaded (an ask that finds no model yet is answered
    without memory and records no ledger entry, by design): bounded to 60 s. Returns how
    many requests were answered."""
    deadline = time.monotonic() + 60
    answered = 0
    for i in range(1000):
        plan = LoadPlan(agents=1, turns=1, cwd=CWD, session_prefix=f"warm{url}{i}")
        answered += run_agents(url, plan).answered
        if b"<ember-memory>" in emulator.requests[-1].body or time.monotonic() > deadline:
            break
    return answered


def settled(db: Path, rows: int) -> tuple[str, int, int]:
    """``inspect`` once ``rows`` accounting rows are in (a process commits them a moment
    after its answers); bounded to 10 s."""
    deadline = time.monotonic() + 10
    while (found := inspect(db))[1] < rows and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_two_proxies_sharing_one_home_never_corrupt_or_drop_a_row(tmp_path: Path) -> None:
    """Two `ember proxy` processes on one EMBER_HOME (SQLite arbitrates between processes)."""

    home = tmp_path / "home"
    db = project_db(home)
    seed(db)
    emulator = Emulator()
    with (
        BackgroundServer(emulator) as upstream,
        proxy_process(home, upstream.url) as (one, url_one),
        proxy_process(home, upstream.url) as (two, url_two),
    ):
        answered = sum(warm_up(url, emulator) for url in (url_one, url_two))
        _, _, asks = settled(db, answered)
        for round_ in range(2):
            results: list[LoadResult] = []

            def drive(
                url: str, name: str, round_: int = round_, results: list[LoadResult] = results
            ) -> None:
                plan = LoadPlan(agents=3, turns=10, cwd=CWD, session_prefix=f"{name}{round_}")
                results.append(run_agents(url, plan))

            threads = [
                threading.Thread(target=drive, args=(url_one, "one")),
                threading.Thread(target=drive, args=(url_two, "two")),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(180)
            assert all(r.failed == 0 for r in results), [r.errors[:2] for r in results]
            answered += sum(r.answered for r in results)
            asks += sum(r.asks for r in results)
        for proc in (one, two):
            stop(proc, signal.SIGTERM)
    check, rows, ledger = inspect(db)
    assert check == "ok"
    assert rows == answered
    assert ledger == asks
