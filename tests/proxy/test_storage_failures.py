"""A project database that fails while the proxy runs: reported once, switched off, serving
goes on — and `ember stats` says so in a line instead of a traceback."""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.project import resolve_project
from ember.store import writerloop
from ember.store.driver import connect
from ember.store.registry import read_problems
from ember.testing.agent import TOOLS, system_prompt
from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/fragile-project"


def db_path(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def ask(stack: Stack, text: str) -> str:
    with anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0) as client:
        msg = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=system_prompt(CWD),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": text}],
            metadata={"user_id": "user_x_account_y_session_0f0f0f0f-0000-4000-8000-00000000abcd"},
        )
    return "".join(getattr(b, "text", "") for b in msg.content)


def healthz(stack: Stack) -> dict[str, object]:
    with urllib.request.urlopen(stack.url + "/healthz", timeout=5) as resp:
        assert resp.status == 200
        data: dict[str, object] = json.loads(resp.read())
    return data


def corrupt(path: Path) -> None:
    """Overwrite every page after the first with garbage (what a bad disk or a second SQLite
    library writing at the same time leaves behind)."""
    data = bytearray(path.read_bytes())
    for i in range(4096, len(data)):
        data[i] = (i * 131) % 251
    path.write_bytes(bytes(data))


def test_a_database_corrupted_while_serving_is_reported_once_and_requests_go_on(
    make_stack: StackFactory, caplog: pytest.LogCaptureFixture
) -> None:
    stack = make_stack(stages="features")
    ask(stack, "first ask")
    stack.settle()
    path = db_path(stack.home)
    db = stack.app.storage.database(path)
    db.close()  # the writer lets go of the file (as after an idle spell), then the disk lies
    db.reopen()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    corrupt(path)
    with caplog.at_level(logging.ERROR, logger="ember.store.database"):
        for i in range(5):
            assert ask(stack, f"ask {i} after the damage")  # every request is still answered
        stack.settle()
    switched = [r for r in caplog.records if "switched off" in r.getMessage()]
    assert len(switched) == 1 and "corrupt" in switched[0].getMessage()
    [problem] = healthz(stack)["storage"]  # type: ignore[misc]
    assert problem["db"] == str(path) and problem["state"] == "corrupt"
    assert "ember doctor" in problem["fix"]
    assert read_problems(stack.home)[str(path)]["state"] == "corrupt"
    # The project's features are off: nothing from its memory reaches the provider.
    assert not any(b"<ember-memory>" in r.body for r in stack.emulator.requests[-5:])


def test_ember_stats_on_a_corrupt_database_prints_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    path = db_path(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)
    result = CliRunner().invoke(cli, ["stats", "--cwd", CWD], env={"EMBER_HOME": str(home)})
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "ember doctor" in str(result.exception)


def test_an_unwritable_database_is_switched_off_then_retried(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The row of the ask made while the file refused writes is held, and written once the
    retry reopens the file: nothing is lost, and the log has one line each way."""
    monkeypatch.setattr(writerloop, "RETRY_AFTER_SECONDS", 0.5)
    stack = make_stack(stages="features")
    ask(stack, "first ask")
    stack.settle()
    path = db_path(stack.home)
    db = stack.app.storage.database(path)
    # The writer's connection can no longer write (SQLITE_READONLY, as on a remounted disk).
    db.write(lambda conn: conn.execute("PRAGMA query_only=ON"))
    with caplog.at_level(logging.WARNING, logger="ember.store.database"):
        assert ask(stack, "an ask whose row cannot be written yet")
        stack.settle()
        deadline = time.monotonic() + 10
        while not (db.health.ok and db.health.was) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert db.health.ok and db.health.was == "unwritable"
    assert db.health.caught_up >= 1  # the accounting row, held and then written
    assert "accounting" not in dict(db.health.dropped_by)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("switched off (unwritable" in m for m in lines) == 1
    assert sum("is back after" in m for m in lines) == 1
    assert ask(stack, "an ask after the disk came back")
    stack.settle()
    conn = connect(path, readonly=True).conn
    rows = conn.execute("SELECT COUNT(*) FROM exchanges WHERE origin = 'client'").fetchone()[0]
    conn.close()
    assert rows == 3  # the row of the ask made while the file was off is there
    # A write whose caller waited (the memory ledger) was refused while off: still said.
    problems = healthz(stack).get("storage", [])
    assert all(p["state"] == "ok" and p["dropped_writes"] for p in problems)
