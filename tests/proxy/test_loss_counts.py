"""Loss figures that are true: a retried write is not a lost one, a recovery forgets no loss,
and a proxy started on a damaged file says so before any write meets it.

Real proxies on loopback with the provider emulator and the official SDKs as clients (the
load of ``bench/support/load.py``); a full disk is the ``Disk`` of ``tests/store/test_database``.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from bench.support.load import LoadPlan, run_agents
from click.testing import CliRunner

from ember.cli import cli
from ember.project import resolve_project
from ember.shaping import stage as shaping_stage
from ember.shaping.recorder import read_state
from ember.shaping.state import ShapingState
from ember.store import writerloop
from ember.store.problems import read_problems
from tests.conftest import Stack, StackFactory
from tests.proxy.test_storage_failures import ask, corrupt
from tests.store.test_database import Disk, fill_up, until

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/fragile-project"


def project_db(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def get(stack: Stack, path: str) -> str:
    with urllib.request.urlopen(stack.url + path, timeout=5) as resp:
        return str(resp.read().decode())


def healthz(stack: Stack) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(get(stack, "/healthz"))
    return data


def outcomes(stack: Stack) -> int:
    """Savings outcomes in the stored ledger (read through the proxy's own owner)."""
    ledger = read_state(ShapingState(stack.home, stack.app.storage.stats)).ledger
    return sum(s.n for s in ledger.treatment.values())


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    d = Disk()
    monkeypatch.setattr(writerloop, "connect", d.connect)
    monkeypatch.setattr(writerloop, "RETRY_AFTER_SECONDS", 0.3)
    monkeypatch.setattr(shaping_stage, "MIN_FLUSH_INTERVAL", 0.2)  # a flush every 0.2 s
    return d


def shaping_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ember.shaping.stage"]


def fill_stats_db(stack: Stack, disk: Disk) -> Any:
    """Warm up (every file open), then fill the disk under the home's stats.db only."""
    answered = run_agents(stack.url, LoadPlan(agents=2, turns=2, cwd=CWD, session_prefix="w"))
    stack.settle()
    stats = stack.app.storage.stats()
    disk.fill(stats)
    fill_up(stats)
    assert stats.health.state == "full"
    return stats, answered.answered


def test_shaping_flushes_retried_through_a_full_disk_lose_nothing_and_warn_once(
    make_stack: StackFactory, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    stack = make_stack(stages="features")
    stats, answered = fill_stats_db(stack, disk)
    load = run_agents(stack.url, LoadPlan(agents=2, turns=4, cwd=CWD, session_prefix="full"))
    assert load.failed == 0
    answered += load.answered
    time.sleep(1.5)  # the periodic flush tries (and fails) about seven times meanwhile
    assert stats.health.state == "full"
    disk.free()
    assert until(lambda: stats.health.ok, 20)
    stack.settle()
    assert until(lambda: outcomes(stack) == answered, 10)  # every outcome reached the file
    assert stats.health.dropped == 0 and dict(stats.health.dropped_by) == {}
    assert healthz(stack) == {"status": "ok"}  # nothing lost: nothing to report
    warned = [m for m in shaping_lines(caplog) if "could not write the savings ledger" in m]
    assert len(warned) == 1, shaping_lines(caplog)  # once per incident, not every flush
    assert sum("written again" in m for m in shaping_lines(caplog)) == 1


def test_a_stop_while_the_disk_is_full_counts_each_unwritten_outcome_once(
    make_stack: StackFactory, disk: Disk
) -> None:
    stack = make_stack(stages="features", output_autotune=False)  # outcomes only
    stats, _ = fill_stats_db(stack, disk)
    load = run_agents(stack.url, LoadPlan(agents=2, turns=3, cwd=CWD, session_prefix="full"))
    assert load.failed == 0
    time.sleep(1.0)  # several failed flushes: none of them counts
    assert "shaping" not in dict(stats.health.dropped_by)
    stack.proxy.stop(30)  # a clean stop, the disk still full
    entry = read_problems(stack.home)[str(stats.path)]
    assert entry["dropped_by"]["shaping"] == load.answered  # each outcome lost, once
    line = CliRunner().invoke(cli, ["stats"], env={"EMBER_HOME": str(stack.home)}).output
    assert f"{load.answered} shaping" in line


def test_losses_survive_doctor_recover_which_adds_what_it_could_not_copy(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features")
    ask(stack, "first ask")
    stack.settle()
    path = project_db(stack.home)
    db = stack.app.storage.database(path)
    db.close()  # the writer lets go of the file (as after an idle spell), then the disk lies
    db.reopen()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    corrupt(path)
    for i in range(5):
        assert ask(stack, f"ask {i} after the damage")
    stack.settle()
    dropped = dict(db.health.dropped_by)["accounting"]
    assert dropped == 5  # the rows of the asks after the damage: refused, counted
    stack.proxy.stop(30)
    env = {"EMBER_HOME": str(stack.home)}

    out = CliRunner().invoke(cli, ["doctor", "--recover", "--db", str(path), "--json"], env=env)
    [recovered] = json.loads(out.output)["recovered"]
    entry = read_problems(stack.home)[str(path)]
    assert entry["state"] == "ok" and entry["dropped_by"]["accounting"] == dropped
    assert entry["unrecovered_rows"] == recovered["lost"]
    assert entry["unrecovered_uncounted"] == recovered["uncounted"]

    stats = CliRunner().invoke(cli, ["stats", "--cwd", CWD, "--json"], env=env)
    problem = json.loads(stats.output)["problem"]
    assert problem["dropped_by"]["accounting"] == dropped  # not "0 lost" after the recovery
    text = CliRunner().invoke(cli, ["stats", "--cwd", CWD], env=env).output
    assert "rebuilt by `ember doctor --recover`" in text
    assert f"{dropped} accounting" in text and "requests are missing from the totals" in text


def test_a_proxy_started_on_a_damaged_database_says_so_before_any_write(
    make_stack: StackFactory,
) -> None:
    first = make_stack(stages="features")
    ask(first, "an ask that creates the project's file")
    first.settle()
    first.proxy.stop(30)
    path = project_db(first.home)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    corrupt(path)

    stack = make_stack(stages="features")  # the same home, nothing asked of it yet
    assert until(lambda: "storage" in healthz(stack), 10)
    [problem] = healthz(stack)["storage"]
    assert problem["db"] == str(path) and problem["state"] == "corrupt"
    assert 'ember_storage_problems{state="corrupt"} 1.0' in get(stack, "/metrics")
    assert ask(stack, "an ask on the damaged project")  # still answered
