"""Helpers shared by the benchmark scripts: bounded child processes, a readiness wait, a child's
CPU time, a project seeded with memories (by this checkout's code or by another's), and what
its injection ledger counts.

``python bench/common.py seed HOME CWD FACTS`` seeds with whatever ``ember`` is first on the
path: ``--baseline`` benches run it with another checkout's ``src`` on PYTHONPATH."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

# The benches' entry point: the composition root installs the features' settings and
# tables (``ember.installed``) for the databases a bench opens in its own process.
import ember.compose  # noqa: F401
from ember.server import free_port

if TYPE_CHECKING:
    from ember.memory.ledger import AskCounts

EMBER = str(Path(sys.executable).with_name("ember"))
#: The bare proxy: accounting only, the foundation every feature sits on (shaping, memory,
#: shadow and TOIN off); the benches put it beside `ember proxy` as shipped.
BARE = {
    "EMBER_OUTPUT_SHAPING": "false",
    "EMBER_MEMORY_MODE": "off",
    "EMBER_SHADOW": "off",
    "EMBER_TOIN": "false",
}


@contextmanager
def process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that is always stopped (terminate, then kill after 10 s)."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def wait_healthy(url: str, timeout: float = 20.0) -> float:
    """Seconds until ``url``/healthz answered 200; raises after ``timeout``."""
    start = time.perf_counter()
    async with aiohttp.ClientSession() as s:
        while time.perf_counter() - start < timeout:
            try:
                async with s.get(url + "/healthz") as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.01)
    raise RuntimeError(f"{url} not healthy after {timeout}s")


def proxy_cmd(port: int, up: str, level: str = "warning") -> list[str]:
    """``ember proxy`` on ``port`` in front of the emulator at ``up`` (quiet logs)."""
    return [
        EMBER,
        "proxy",
        "--port",
        str(port),
        "--anthropic-url",
        up,
        "--openai-url",
        up + "/v1",
        "--log-level",
        level,
    ]


@dataclass
class ProxyProcess:
    """One ``ember proxy`` process a soak starts, kills and starts again on the same home
    (its log appended to ``home/log_name`` across starts)."""

    home: Path
    env: dict[str, str]
    log_name: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / self.log_name

    def start(self, upstream: str, level: str = "warning") -> None:
        with open(self.log, "ab") as log:  # the child keeps its own copy of the descriptor
            argv = proxy_cmd(self.port, upstream, level)
            self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        asyncio.run(wait_healthy(self.url, timeout=60))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def quiet(pids: list[int], timeout: float = 15.0, window: float = 0.25) -> float:
    """Wait until the processes ``pids`` together use under 3% of a core over ``window``
    seconds (at most ``timeout``); returns the seconds waited.

    A proxy finishes its work after its clients have their answers (accounting, transcripts,
    learning): measured right after it, the next cell shares the cores with that backlog. A
    direct run slowed so made a proxy's ratio look better than it was."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = sum(cpu_seconds(p) for p in pids)
        await asyncio.sleep(window)
        if sum(cpu_seconds(p) for p in pids) - before < 0.03 * window:
            break
    return time.monotonic() - started


def seed_project(home: Path, cwd: str, facts: int, store_url: str | None = None) -> Path:
    """``home`` whose project at ``cwd`` holds ``facts`` generated short memories (real vectors
    of the shipped model); returns the project's database (with ``store_url``, the path whose
    PostgreSQL schema holds them). Imports ember only when called."""
    sys.path.insert(0, str(Path(__file__).parent))
    from ember.embedder import get_embedder
    from ember.memory import HierarchicalMemory, NewMemory
    from ember.project import resolve_project
    from ember.store.registry import Storage
    from memory_data import short_memories

    ref = resolve_project({"x-ember-cwd": cwd})
    assert ref is not None
    db = ref.db_path(home)
    if store_url is None:
        db.parent.mkdir(parents=True, exist_ok=True)
    storage = Storage(home, store_url=store_url)
    try:
        with HierarchicalMemory(storage.database(db), get_embedder()) as mem:
            mem.add_many([NewMemory(t, importance=0.7) for t in short_memories(facts)])
    finally:
        storage.close()
    return db


def ledger_counts(db: Path) -> AskCounts:
    """What a project's injection ledger says of its new asks, as ``ember stats`` reads it."""
    from ember.memory.ledger import ask_counts
    from ember.store.driver import connect

    conn = connect(db, readonly=True).conn  # ember's one SQLite library, as everywhere
    try:
        return ask_counts(conn)
    finally:
        conn.close()


def seed_with(env: dict[str, str], home: Path, cwd: str, facts: int) -> None:
    """``seed_project`` in a child process with ``env``: a baseline checkout's project is
    written by that checkout's own code."""
    cmd = [sys.executable, __file__, "seed", str(home), cwd, str(facts)]
    subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    if sys.argv[1:2] != ["seed"] or len(sys.argv) != 5:
        sys.exit("usage: python bench/common.py seed HOME CWD FACTS")
    seed_project(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
