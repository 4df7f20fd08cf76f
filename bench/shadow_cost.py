"""Shadow memory against its baselines: cache-read share, cost, the user's latency, cancellation.

The provider emulator (``bench/shadow_upstream.py``: ``ember dev upstream`` plus an agent's tool
turns and the shadow question answered, see there) and ``ember proxy`` processes run apart, on
loopback; this process drives Claude-Code-like sessions through them with aiohttp
(``bench/shadow_agent.py``) and reads what the proxies recorded in their project databases.

1. **Cache-read share and cost** (proxy in ``EMBER_SHADOW=compare``: the shadow runs, then the
   steward reads the very same rows). For each session size, a session is grown to that many
   prompt tokens in tool-calling turns whose asks follow each other at once (each queued
   trigger is cancelled by the next ask), so its first run has the *whole session* unread;
   then one more turn of two tool calls, read by a second run (*the last turn* unread: the
   steady state of a session whose turns end with pauses). A twin session sends the same
   conversation without any ``cache_control``: ember cannot fork it, and its shadow reads the
   same backlog on the cold path (the light model, ``EMBER_LIGHT_MODEL``, rendered pages).
   Costs are at list prices (``ember.prices``), output tokens included, from each run's own
   usage. "cold re-read" is computed, not run: the hot run's whole input billed fresh at the
   session model's price (a steward re-reading the full, unshortened backlog).
2. **The user's latency**: two proxies (``EMBER_SHADOW=off`` and ``primary``), the same paced
   asks alternating between them, order flipped every round; each session's asks are spaced
   past the 2 s debounce, so its shadow run goes while other sessions' asks are served.
3. **Cancellation**: the emulator never answers a shadow call of a marked session; once the
   call has arrived, the user's next ask is sent, and the time until the emulator sees the
   call abandoned is measured (``time.monotonic`` in both processes: one clock per machine).

Every loop is bounded; nothing leaves loopback. The spend cap is raised to 1.0 so that every
run goes (the share each run takes of its session's own spend is printed instead).

    python bench/shadow_cost.py [--sizes 5000,20000,50000] [--sessions 12] [--rounds 25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from common import process, proxy_cmd, wait_healthy
from ember.server import free_port
from shadow_agent import AgentSession, ask_text, grow, project_db, query
from shadow_tables import (
    LIGHT_MODEL,
    CancelResult,
    CostRow,
    LatencyResult,
    Reading,
    print_cancel,
    print_cost,
    print_latency,
    print_share,
)

RUN_TIMEOUT = 60.0


@dataclass
class Proxy:
    url: str
    home: Path


def proxy_env(home: Path, shadow: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env.update(
        EMBER_HOME=str(home),
        EMBER_SHADOW=shadow,
        EMBER_SHADOW_MAX_SHARE="1.0",
        EMBER_LIGHT_MODEL=LIGHT_MODEL,
    )
    return env


async def finished_run(
    db: Path, table: str, session_id: str, seen: set[str], timeout: float = RUN_TIMEOUT
) -> Any:
    """The session's next finished run of ``table`` (one not in ``seen``) that read through
    the session's latest recorded message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = query(
            db,
            f"SELECT * FROM {table} WHERE session_id=? AND status!='running' AND through_seq="
            "(SELECT MAX(seq) FROM transcript_messages WHERE session_id=?)",
            session_id,
            session_id,
        )
        fresh = [r for r in rows if r["id"] not in seen]
        if fresh:
            seen.add(fresh[-1]["id"])
            return fresh[-1]
        await asyncio.sleep(0.1)
    raise RuntimeError(f"no finished {table} row for session {session_id} in {timeout:.0f}s")


# -- 1 and 2: cache-read share and cost ------------------------------------------------------


def reading(db: Path, row: Any) -> Reading:
    keys = row.keys()
    unread = 0
    if "path" in keys and row["from_seq"] is not None:
        [(unread,)] = query(
            db,
            "SELECT COUNT(*) FROM transcript_messages WHERE session_id=? AND seq BETWEEN ? AND ?",
            row["session_id"],
            row["from_seq"],
            row["through_seq"],
        )
    return Reading(
        row["path"] if "path" in keys else "steward",
        row["calls"],
        row["input_tokens"],
        row["cache_read_tokens"],
        row["cache_write_tokens"],
        row["output_tokens"],
        row["estimated_usd"],
        row["status"],
        unread,
    )


async def one_session(proxy: Proxy, size: int, cached: bool) -> list[tuple[str, int, Any, Any]]:
    """Grow a session to ``size`` tokens, then one more turn; the run and steward row of each."""
    cwd = f"/home/bench/shadow-{size}"
    db = project_db(proxy.home, cwd)
    sid = f"5add{size:08d}-{int(cached)}000-4000-8000-000000000001"
    out = []
    seen: set[str] = set()
    async with aiohttp.ClientSession() as http:
        session = AgentSession(http, proxy.url, sid, cwd, cached=cached)
        step = await grow(session, size)
        for scenario in ("whole session", "last turn"):
            if scenario == "last turn":
                await session.turn(ask_text(step, 2))
            run = await finished_run(db, "shadow_memory_runs", sid, seen)
            steward = await finished_run(db, "steward_runs", sid, seen)
            out.append((scenario, session.last_input, run, steward))
    return out


async def cost_cells(proxy: Proxy, sizes: list[int]) -> tuple[list[CostRow], list[str]]:
    rows: list[CostRow] = []
    notes: list[str] = []
    for size in sizes:
        hot, twin = await asyncio.gather(
            one_session(proxy, size, True), one_session(proxy, size, False)
        )
        db = project_db(proxy.home, f"/home/bench/shadow-{size}")
        for (scenario, tokens, run, steward), (_, _, cold, _) in zip(hot, twin, strict=True):
            [(own,)] = query(
                db, "SELECT cost_usd FROM session_totals WHERE session_id=?", run["session_id"]
            )
            rows.append(
                CostRow(
                    size,
                    scenario,
                    tokens,
                    own,
                    reading(db, run),
                    reading(db, steward),
                    reading(db, cold),
                )
            )
        for r in query(db, "SELECT session_id, COUNT(*) FROM shadow_memory_runs GROUP BY 1"):
            if r[1] != 2:
                notes.append(f"session {r[0]}: {r[1]} shadow runs (2 expected)")
    return rows, notes


# -- 3. the user's own latency, shadow off vs on ---------------------------------------------


async def latency_cells(
    proxies: dict[str, Proxy], events: Path, sessions: int, rounds: int, interval: float
) -> LatencyResult:
    """Paced asks alternating between the two proxies; every session is warmed first (one
    turn of three tool calls: a prompt of ~6k tokens, its shadow run's backlog)."""
    async with aiohttp.ClientSession() as http:
        crowd = {
            name: [
                AgentSession(
                    http,
                    p.url,
                    f"1a7e0000-{i:04d}-4000-8000-{name == 'on':012d}",
                    f"/home/bench/latency-{name}",
                )
                for i in range(sessions)
            ]
            for name, p in proxies.items()
        }
        for group in crowd.values():
            await asyncio.gather(*(s.turn(ask_text(1, 3, remember=False)) for s in group))
        await asyncio.sleep(3.0)  # the warm-up's own shadow runs
        calls_before = count_events(events, "shadow-start")
        samples: dict[str, list[float]] = {"off": [], "on": []}
        paired: list[float] = []
        step = 2
        slot = time.perf_counter()
        for r in range(rounds):
            order = ("off", "on") if r % 2 == 0 else ("on", "off")
            for i in range(sessions):
                pair: dict[str, float] = {}
                for name in order:
                    slot += interval
                    await asyncio.sleep(max(0.0, slot - time.perf_counter()))
                    s = crowd[name][i]
                    await s.turn(ask_text(step + r, 0, remember=False))
                    pair[name] = s.latencies[-1]
                    samples[name].append(s.latencies[-1])
                paired.append(pair["on"] - pair["off"])
        shadow_calls = count_events(events, "shadow-start") - calls_before
    db = project_db(proxies["on"].home, "/home/bench/latency-on")
    runs = {
        r[0]: r[1] for r in query(db, "SELECT status, COUNT(*) FROM shadow_memory_runs GROUP BY 1")
    }
    return LatencyResult(samples["off"], samples["on"], paired, runs, shadow_calls)


# -- 4. cancellation -------------------------------------------------------------------------


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def count_events(path: Path, event: str) -> int:
    return sum(1 for e in read_events(path) if e["event"] == event)


async def wait_event(path: Path, event: str, tag: str, after: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in read_events(path):
            if e["event"] == event and e["tag"] == tag and e["t"] > after:
                return float(e["t"])
        await asyncio.sleep(0.005)
    raise RuntimeError(f"no {event} event in {timeout:.0f}s")


async def cancel_cells(proxy: Proxy, events: Path, trials: int) -> CancelResult:
    """Each trial: a turn ends, the shadow's call arrives and hangs, the user asks again."""
    cwd = "/home/bench/bench-hang-shadow"
    delays: list[float] = []
    users: list[float] = []
    async with aiohttp.ClientSession() as http:
        s = AgentSession(http, proxy.url, "cafe0000-0000-4000-8000-00000000000c", cwd)
        since = time.monotonic()
        await s.turn(ask_text(1, 2))
        for t in range(trials):
            await wait_event(events, "shadow-start", "hang", since, 30)
            await asyncio.sleep(0.2)  # the call is well under way
            spoke = time.monotonic()
            asked = asyncio.ensure_future(s.turn(ask_text(t + 2, 0)))
            gone = await wait_event(events, "shadow-abandoned", "hang", spoke, 10)
            await asked
            delays.append(gone - spoke)
            users.append(s.latencies[-1])
            since = spoke
    db = project_db(proxy.home, cwd)
    await asyncio.sleep(1.0)
    runs = {
        r[0]: r[1] for r in query(db, "SELECT status, COUNT(*) FROM shadow_memory_runs GROUP BY 1")
    }
    [(proposals,)] = query(db, "SELECT COUNT(*) FROM shadow_fact_proposals")
    return CancelResult(delays, users, runs, proposals)


# -- the run ---------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="ember-bench-shadow-"))
    events = root / "events.jsonl"
    up_port = free_port()
    up = f"http://127.0.0.1:{up_port}"
    upstream = [
        sys.executable,
        str(Path(__file__).with_name("shadow_upstream.py")),
        "--port",
        str(up_port),
        "--events",
        str(events),
    ]
    ports = {name: free_port() for name in ("compare", "off", "on")}
    proxies = {n: Proxy(f"http://127.0.0.1:{p}", root / n) for n, p in ports.items()}
    load = os.getloadavg()[0]
    with (
        process(upstream, proxy_env(root, "off")),
        process(proxy_cmd(ports["compare"], up), proxy_env(proxies["compare"].home, "compare")),
        process(proxy_cmd(ports["off"], up), proxy_env(proxies["off"].home, "off")),
        process(proxy_cmd(ports["on"], up), proxy_env(proxies["on"].home, "primary")),
    ):
        for url in (up, *(p.url for p in proxies.values())):
            await wait_healthy(url)
        started = time.monotonic()
        costs, notes = await cost_cells(proxies["compare"], args.sizes)
        on_off = {"off": proxies["off"], "on": proxies["on"]}
        cancel = await cancel_cells(proxies["on"], events, args.trials)
        latency = await latency_cells(on_off, events, args.sessions, args.rounds, args.interval)
        took = time.monotonic() - started
    print(
        f"shadow memory — emulator and proxies as separate processes, loopback, "
        f"{os.cpu_count()} cores shared with other work (load average {load:.1f} at the start)"
        f"; {took:.0f} s\n"
    )
    print_share(costs)
    print_cost(costs)
    for note in notes:
        print(f"note: {note}")
    print_latency(latency, args.sessions, args.interval)
    print_cancel(cancel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="5000,20000,50000",
        help="session sizes in prompt tokens, comma-separated",
    )
    parser.add_argument("--sessions", type=int, default=12, help="sessions per proxy (latency)")
    parser.add_argument("--rounds", type=int, default=25, help="asks per session (latency)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between asks")
    parser.add_argument("--trials", type=int, default=8, help="cancellation trials")
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.sizes.split(",")]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
