"""A proxy and an MCP server writing one project at once: nothing lost, nothing corrupted.

The proxy (every feature on, as ``ember proxy`` builds it) serves N agents
(``bench/support/load.py``: JSON and streaming, Anthropic and OpenAI SDKs) on one project while
``ember mcp``, in a process of its own as a client starts it, saves and forgets facts of that
project in a loop through the official SDK's stdio client (a search every few cycles). Two
processes, two writers of one SQLite file: what ember relies on there is WAL and the busy
timeout, as for the CLI next to a proxy. Afterwards, read as any other process would:

- ``PRAGMA integrity_check`` is ``ok``;
- the client's accounting rows equal the answered requests;
- the MCP server's facts (``metadata.source = "mcp"``) equal saved minus forgotten, each
  current and with its vector; the FTS index holds exactly the current memories.

    python bench/mcp_soak.py [--agents 4] [--turns 12] [--cycles 60]

Loopback only; bounded: the agents' turns and deadline, the cycles, the SDK's read timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

import ember
from ember.compose import build_app
from ember.config import load_settings
from ember.project import project_from_cli
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.testing import Emulator
from support.load import LoadPlan, LoadResult, run_agents

SRC = str(Path(ember.__file__).resolve().parents[1])
SEEDS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]


@dataclass
class McpLoop:
    """What the MCP client did: facts saved and forgotten, and how long each call took."""

    saved: int = 0
    forgotten: int = 0
    searches: int = 0
    during_load: int = 0  #: calls made while the agents were running
    seconds: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass
class Soak:
    load: LoadResult
    mcp: McpLoop
    integrity: str
    client_rows: int
    mcp_rows: int
    mcp_current_with_vectors: int
    fts_rows: int
    current_rows: int
    wall_seconds: float


def server_params(home: Path, project: Path) -> StdioServerParameters:
    env = {"EMBER_HOME": str(home), "PYTHONPATH": SRC, "EMBER_LOG_LEVEL": "warning"}
    if "XDG_CACHE_HOME" in os.environ:
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    return StdioServerParameters(
        command=sys.executable, args=["-m", "ember", "mcp", "--cwd", str(project)], env=env
    )


async def mcp_loop(
    params: StdioServerParameters,
    start_agents: Callable[[], None],
    loading: threading.Event,
    cycles: int,
    deadline: float,
) -> McpLoop:
    """Once the server answers and holds the seeds, start the agents; then save a fact every
    cycle, forget every third one saved, search every fifth cycle: at least ``cycles``
    cycles, and on while the agents run (at most ten times as many)."""
    out = McpLoop()
    kept: list[str] = []
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            for fact in SEEDS:  # what the agents' asks find
                kept.append(await _call(session, out, "memory_save", facts=[{"content": fact}]))
                out.saved += 1
            start_agents()
            i = 0
            while (i < cycles or loading.is_set()) and i < 10 * cycles:
                if time.monotonic() > deadline:
                    out.errors.append(f"deadline after {i} cycles")
                    break
                during = loading.is_set()
                fact = f"Soak fact {i}: the worker-{i} service listens on port {9000 + i}."
                kept.append(await _call(session, out, "memory_save", facts=[{"content": fact}]))
                out.saved += 1
                if i % 3 == 2:
                    await _call(session, out, "memory_forget", id=kept.pop(-2))
                    out.forgotten += 1
                if i % 5 == 4:
                    await _call(session, out, "memory_search", query=f"which port for worker-{i}")
                    out.searches += 1
                out.during_load += during
                i += 1
    return out


async def _call(session: ClientSession, out: McpLoop, tool: str, **arguments: Any) -> str:
    """One tool call, timed; the id it saved or forgot ("" for a search)."""
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    out.seconds.setdefault(tool, []).append(time.perf_counter() - started)
    text = result.content[0].text  # type: ignore[union-attr]
    if result.is_error:
        out.errors.append(f"{tool}: {text}")
        raise RuntimeError(f"{tool} failed: {text}")
    doc = json.loads(text)
    if tool == "memory_save":
        return str(doc["saved"][0]["id"])
    if tool == "memory_forget":
        return str(doc["forgotten"][0])
    return ""


def soak(home: Path, project: Path, agents: int = 4, turns: int = 12, cycles: int = 60) -> Soak:
    """The proxy under ``agents`` x ``turns`` while the MCP loop runs on the same project."""
    started = time.monotonic()
    deadline = started + 600
    with BackgroundServer(Emulator()) as upstream:
        settings = load_settings(
            env={"EMBER_HOME": str(home)},
            anthropic_url=upstream.url,
            openai_url=upstream.url + "/v1",
            shadow="off",  # its own calls would change what the emulator is asked
        )
        app = build_app(settings)
        with BackgroundServer(app) as proxy:
            loading = threading.Event()
            loading.set()
            results: list[LoadResult] = []

            def load() -> None:
                try:
                    plan = LoadPlan(agents, turns, str(project), "soak", deadline_seconds=300)
                    results.append(run_agents(proxy.url, plan))
                finally:
                    loading.clear()

            agents_thread = threading.Thread(target=load, daemon=True)
            params = server_params(home, project)
            mcp = anyio.run(mcp_loop, params, agents_thread.start, loading, cycles, deadline)
            agents_thread.join(max(0.0, deadline - time.monotonic()))
            assert proxy.loop is not None
            asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(60)
            app.storage.flush(60)
    ref = project_from_cli(None, str(project))
    assert ref is not None
    counts = inspect(ref.db_path(home))
    return Soak(results[0], mcp, *counts, time.monotonic() - started)  # type: ignore[arg-type]


def inspect(db: Path) -> tuple[str, int, int, int, int, int]:
    """(integrity, client rows, MCP facts, MCP facts current with a vector, FTS rows,
    current memories), read by a connection of its own, as another process would."""
    conn = connect(db, readonly=True).conn
    mcp = "json_extract(m.metadata, '$.source') = 'mcp'"

    def one(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0])

    try:
        return (
            str(conn.execute("PRAGMA integrity_check").fetchone()[0]),
            one("SELECT COUNT(*) FROM exchanges WHERE origin = 'client'"),
            one(f"SELECT COUNT(*) FROM memories m WHERE {mcp}"),
            one(
                "SELECT COUNT(*) FROM memories m JOIN memory_vectors v ON v.seq = m.seq "
                f"WHERE {mcp} AND m.valid_until IS NULL"
            ),
            one("SELECT COUNT(*) FROM memory_fts"),
            one("SELECT COUNT(*) FROM memories WHERE valid_until IS NULL"),
        )
    finally:
        conn.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(s: Soak) -> str:
    lines = [
        f"agents: {s.load.answered} answered, {s.load.failed} failed, {s.load.asks} new asks",
        f"mcp: {s.mcp.saved} saved, {s.mcp.forgotten} forgotten, {s.mcp.searches} searches, "
        f"{s.mcp.during_load} cycles while the agents ran, errors {s.mcp.errors[:3]}",
    ]
    for tool, took in sorted(s.mcp.seconds.items()):
        lines.append(
            f"  {tool}: n={len(took)} p50 {1000 * statistics.median(took):.1f} ms, "
            f"p95 {1000 * pct(took, 0.95):.1f} ms, max {1000 * max(took):.1f} ms"
        )
    lines += [
        f"integrity_check: {s.integrity}",
        f"client rows {s.client_rows} == answered {s.load.answered}: "
        f"{s.client_rows == s.load.answered}",
        f"mcp facts {s.mcp_rows} == saved - forgotten {s.mcp.saved - s.mcp.forgotten}: "
        f"{s.mcp_rows == s.mcp.saved - s.mcp.forgotten} (with vectors: "
        f"{s.mcp_current_with_vectors})",
        f"fts rows {s.fts_rows} == current memories {s.current_rows}: "
        f"{s.fts_rows == s.current_rows}",
        f"wall {s.wall_seconds:.1f} s",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--cycles", type=int, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-mcp-soak-") as tmp:
        project = Path(tmp, "soak-project").resolve()
        project.mkdir()
        print(report(soak(Path(tmp, "home"), project, args.agents, args.turns, args.cycles)))


if __name__ == "__main__":
    main()
