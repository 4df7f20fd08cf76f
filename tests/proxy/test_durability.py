"""Nothing accepted is lost: a clean stop writes every row, a kill -9 only the last moments.

Run against a real ``ember proxy`` process (signals are the point), with the provider
emulator in this process; loopback only, bounded by the plan's turns and deadlines.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import pytest
from bench.support.load import LoadPlan, run_agents
from click.testing import CliRunner

from ember.cli import cli
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.shaping.recorder import read_state
from ember.shaping.state import ShapingState
from ember.store.driver import connect
from ember.store.registry import Storage, stats_db_path
from ember.testing import Emulator
from ember.testing.agent import TOOLS, system_prompt
from tests.conftest import StackFactory
from tests.proxy.subprocess_proxy import proxy_process, stop

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CWD = "/home/dev/durable-project"
#: How long after its answer a row may still be uncommitted (see store/accounting.py): the
#: writer commits as soon as it is free; the kill -9 test waits this long, no more.
KILL_WINDOW_SECONDS = 0.5


def project_db(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def rows_and_check(home: Path) -> tuple[int, str]:
    return client_rows(project_db(home))


def client_rows(path: Path) -> tuple[int, str]:
    if not path.exists():
        return 0, "ok"
    conn = connect(path, readonly=True).conn
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


class Streamers:
    """Clients that stream with the official anthropic SDK, each its own session, in a loop
    bounded by ``turns`` and ``stop``. ``answered``: streams read to their end (the client
    received the whole answer). Agents with ``project=False`` name no working directory, like
    Claude Code's title requests: their rows wait in memory for the session to name one."""

    def __init__(self, url: str, agents: int, *, without_project: int, turns: int = 200) -> None:
        self.answered = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(url, i, i >= agents - without_project, turns))
            for i in range(agents)
        ]
        for t in self.threads:
            t.start()

    def _run(self, url: str, index: int, no_project: bool, turns: int) -> None:
        session = f"0f0f0f0f-0000-4000-8000-{index:012d}"
        system = [{"type": "text", "text": "Be brief."}] if no_project else system_prompt(CWD)
        with anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0) as client:
            for turn in range(turns):
                if self.stop.is_set():
                    return
                try:
                    stream = client.messages.create(
                        model="claude-sonnet-4-5",
                        max_tokens=256,
                        system=system,  # type: ignore[arg-type]
                        tools=TOOLS,  # type: ignore[arg-type]
                        messages=[{"role": "user", "content": f"ask {turn} of {index}"}],
                        metadata={"user_id": f"user_x_account_y_session_{session}"},
                        stream=True,
                    )
                    for _ in stream:
                        pass
                except Exception:
                    return  # the proxy was killed under this request: not answered
                with self._lock:
                    self.answered += 1

    def wait_for(self, answered: int, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while self.answered < answered and time.monotonic() < deadline:
            time.sleep(0.01)

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


def storage_of(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
        found: list[dict[str, Any]] = json.loads(resp.read()).get("storage", [])
    return found


def told_of(url: str) -> int:
    """Answers the proxy says have no row, over every database of ``/healthz``."""
    return sum(int(p.get("lost_at_kill", 0)) for p in storage_of(url))


def test_kill_9_under_streaming_clients_the_next_start_says_how_many_rows_are_missing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with BackgroundServer(Emulator()) as upstream:
        with proxy_process(home, upstream.url) as (proc, url):
            clients = Streamers(url, 8, without_project=2)
            clients.wait_for(150)
            proc.kill()  # mid-run: streams in flight, rows queued and held
            proc.wait(10)
            clients.join()
        answered = clients.answered
        rows = sum(client_rows(p)[0] for p in (project_db(home), stats_db_path(home)))
        gap = answered - rows
        assert gap > 0  # the held rows of the two clients without a project at least
        with proxy_process(home, upstream.url) as (proc, url):
            deadline = time.monotonic() + 20
            while told_of(url) < gap and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # each database is told in turn: none more after the last
            told = told_of(url)
            assert told == gap, (told, answered, rows)  # every one of them, no more
            assert stop(proc, signal.SIGTERM) in (0, -signal.SIGTERM)
            assert proc.stderr is not None
            log = proc.stderr.read().decode()
    assert log.count("have no accounting row") == 1, log[-2000:]
    env = {"EMBER_HOME": str(home)}
    said = [
        json.loads(CliRunner().invoke(cli, ["stats", *where, "--json"], env=env).output).get(
            "problem"
        )
        for where in (["--cwd", CWD], [])
    ]
    assert sum(p["lost_at_kill"] for p in said if p) == gap
    text = CliRunner().invoke(cli, ["stats", "--cwd", CWD], env=env).output
    if said[0]:  # the project's own rows lost to the kill, said in its table's warning
        assert f"{said[0]['lost_at_kill']} answered requests have no accounting row" in text
