"""Soak with a fault: agents keep asking while a project's disk fills up and frees, or while
its WAL is damaged; nothing answered disappears without a number.

Every answered request makes one accounting row. Whatever happens to the file, each answered
request's row is either in the file or counted as dropped (``Health.dropped_by``), and the
log carries one line per change of state — never one per request. Loopback only; bounded by
the load plans' turns and deadlines and by ``until``'s timeouts.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from bench.support.load import LoadPlan, LoadResult, run_agents
from click.testing import CliRunner

from ember.cli import cli
from ember.project import resolve_project
from ember.store import database as database_mod
from ember.store import writerloop
from ember.store.database import Database
from ember.store.driver import connect
from ember.store.hold import HoldLimit
from tests.conftest import Stack, StackFactory
from tests.store.test_database import Disk, until

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/bad-day-project"


def project_db(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def client_rows(path: Path) -> tuple[int, str]:
    conn = connect(path, readonly=True).conn
    try:
        rows = conn.execute("SELECT COUNT(*) FROM exchanges WHERE origin = 'client'").fetchone()
        return int(rows[0]), str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def healthz(stack: Stack) -> dict[str, Any]:
    with urllib.request.urlopen(stack.url + "/healthz", timeout=5) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def load_in_background(stack: Stack, plan: LoadPlan) -> tuple[threading.Thread, LoadResult]:
    box: list[LoadResult] = []
    thread = threading.Thread(target=lambda: box.append(run_agents(stack.url, plan)))
    thread.start()
    holder = LoadResult()

    def result() -> LoadResult:
        thread.join(plan.deadline_seconds + 30)
        assert box, "the load did not finish"
        return box[0]

    holder.__dict__["result"] = result
    return thread, holder


def finish(handle: tuple[threading.Thread, LoadResult]) -> LoadResult:
    result: LoadResult = handle[1].__dict__["result"]()
    assert result.failed == 0, result.errors[:3]
    return result


def storage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ember.store.database"]


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    d = Disk()
    monkeypatch.setattr(writerloop, "connect", d.connect)
    monkeypatch.setattr(writerloop, "RETRY_AFTER_SECONDS", 0.3)
    return d


def warm(stack: Stack) -> tuple[Database, int]:
    answered = run_agents(stack.url, LoadPlan(agents=1, turns=2, cwd=CWD, session_prefix="w"))
    stack.settle()
    return stack.app.storage.database(project_db(stack.home)), answered.answered


def test_a_disk_that_fills_mid_load_loses_no_row(
    make_stack: StackFactory, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    stack = make_stack()
    db, answered = warm(stack)
    handle = load_in_background(
        stack, LoadPlan(agents=4, turns=30, cwd=CWD, session_prefix="load", deadline_seconds=90)
    )
    time.sleep(0.3)
    disk.fill(db)
    assert until(lambda: db.health.state == "full", 20)
    assert until(lambda: db.health.held > 0, 20)
    during = healthz(stack)
    [problem] = during["storage"]
    assert problem["state"] == "full" and problem["held_writes"] > 0
    time.sleep(1.0)
    disk.free()
    result = finish(handle)
    stack.settle()
    assert until(lambda: db.health.ok and db.health.held == 0, 20)
    assert db.flush(10)
    answered += result.answered
    rows, check = client_rows(db.path)
    assert check == "ok"
    assert rows == answered  # every row held through the gap was written
    assert db.health.dropped == 0 and db.health.caught_up > 0
    assert healthz(stack) == {"status": "ok"}
    lines = storage_lines(caplog)
    assert len(lines) == 2, lines
    assert "switched off (full" in lines[0] and "is back after" in lines[1]
    assert not tracebacks(caplog)


def test_past_the_hold_limit_every_answered_row_is_written_or_counted(
    make_stack: StackFactory, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    stack = make_stack()
    stack.app.storage.hold = HoldLimit(5)  # before the project's database exists
    db, answered = warm(stack)
    # Full before the load starts: filled 0.3 s into it, a load that ran fast (memory giving
    # way under the flood) had sent all but a few rows already, and none passed the limit.
    disk.fill(db)
    handle = load_in_background(
        stack, LoadPlan(agents=4, turns=20, cwd=CWD, session_prefix="load", deadline_seconds=90)
    )
    assert until(lambda: db.health.state == "full", 20)
    assert until(lambda: db.health.dropped > 0, 20)
    time.sleep(0.5)
    disk.free()
    result = finish(handle)
    stack.settle()
    assert until(lambda: db.health.ok and db.health.held == 0, 20)
    assert db.flush(10)
    answered += result.answered
    rows, check = client_rows(db.path)
    dropped = dict(db.health.dropped_by).get("accounting", 0)
    assert check == "ok" and dropped > 0
    assert rows + dropped == answered
    [problem] = healthz(stack)["storage"]  # back, and still says what it lost
    assert problem["state"] == "ok" and problem["was"] == "full"
    assert problem["dropped_by"] == {"accounting": dropped}
    assert not tracebacks(caplog)


def test_a_wal_damaged_under_load_is_switched_off_once_and_recovered_with_counts(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(database_mod, "CHECK_SECONDS", 0.3)
    stack = make_stack(stages="features")
    db, answered = warm(stack)
    # Another process reads all along: checks pass, but the WAL cannot restart past its
    # snapshot, so the frames written by the load are still in the WAL when it is damaged.
    pin = connect(db.path, readonly=True).conn
    pin.execute("BEGIN")
    pin.execute("SELECT COUNT(*) FROM exchanges").fetchone()
    answered += run_agents(
        stack.url, LoadPlan(agents=3, turns=8, cwd=CWD, session_prefix="before")
    ).answered
    stack.settle()
    wal = Path(str(db.path) + "-wal")
    damage_latest_frames(wal)
    pin.execute("COMMIT")
    pin.close()
    after = run_agents(stack.url, LoadPlan(agents=3, turns=8, cwd=CWD, session_prefix="after"))
    assert after.failed == 0, after.errors[:3]  # every request is still answered
    answered += after.answered
    assert until(lambda: db.health.state == "corrupt", 20)
    answered += run_agents(
        stack.url, LoadPlan(agents=1, turns=3, cwd=CWD, session_prefix="late")
    ).answered
    stack.settle()
    dropped = dict(db.health.dropped_by).get("accounting", 0)
    assert dropped >= 3  # the late requests at least: their rows were refused, and counted
    lines = [m for m in storage_lines(caplog) if "switched off" in m]
    assert len(lines) == 1 and "corrupt" in lines[0]
    assert not [t for t in tracebacks(caplog) if t.startswith("ember.proxy.pipeline")]
    [problem] = healthz(stack)["storage"]
    assert problem["state"] == "corrupt" and "doctor --recover" in problem["fix"]

    stack.app.storage.close()  # as at shutdown: the damaged WAL is not copied into the file
    assert wal.exists()
    look = db.path.parent / "look"
    look.mkdir()
    shutil.copy(db.path, look / "ember.db")
    shutil.copy(wal, look / "ember.db-wal")
    assert client_rows(look / "ember.db")[1] == "ok"  # readable at its last good commit

    out = CliRunner().invoke(
        cli, ["doctor", "--recover", "--db", str(db.path), "--json"],
        env={"EMBER_HOME": str(stack.home)},
    )  # fmt: skip
    report = json.loads(out.output)
    [rec] = report["recovered"]
    rows, check = client_rows(db.path)
    assert check == "ok" and rows == rec["tables"]["exchanges"]["copied"] - _own_rows(db.path)
    assert rows + dropped <= answered
    if rows + dropped < answered:  # rows that lived only on the garbage frames: said so
        assert not rec["exact"] and "*" in rec["uncounted"]
        assert any("cannot be counted" in n for n in rec["notes"])


def damage_latest_frames(wal: Path) -> None:
    """Garbage over the page of every frame that holds a page's newest version (what every
    new reader of the file reads), keeping the frame headers: a bad disk, a stray write."""
    data = wal.read_bytes()
    step = 24 + 4096
    newest: dict[int, int] = {}
    for i in range((len(data) - 32) // step):
        newest[int.from_bytes(data[32 + i * step : 36 + i * step], "big")] = i
    with open(wal, "r+b") as f:
        for i in newest.values():
            f.seek(32 + i * step + 24 + 8)
            f.write(bytes((j * 7 + 3) % 251 for j in range(4096 - 8)))


def _own_rows(path: Path) -> int:
    conn = connect(path, readonly=True).conn
    try:
        found = conn.execute("SELECT COUNT(*) FROM exchanges WHERE origin != 'client'")
        return int(found.fetchone()[0])
    finally:
        conn.close()
