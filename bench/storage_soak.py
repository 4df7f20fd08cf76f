"""Storage under load: several agents on one project, memory and shaping on.

The same load (``ember.testing.load``: N agents x M turns, JSON and streaming, Anthropic and
OpenAI SDKs) runs first straight at the provider emulator, then through the proxy with the
defaults (shaping, memory ``auto_tail``, shadow memory, accounting) on a seeded project memory,
then through a second proxy with memory off (what the memory search costs per ask). Printed
side by side: requests per second, latency per request, and the proxy's database writer —
commits, jobs per transaction and how long a write waited from its submission to its commit
(the window a ``kill -9`` can lose). After each round: ``PRAGMA integrity_check`` and client
rows == answered requests (ember's own calls, shadow memory with the defaults, are rows of
their own origin and counted apart).

    python bench/storage_soak.py [--agents 8] [--turns 25] [--rounds 3]

Loopback only; every loop is bounded by its turns and a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from ember.compose import build_app
from ember.config import load_settings
from ember.memory import HierarchicalMemory
from ember.models import Embedder, get_embedder
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.testing import Emulator
from ember.testing.load import LoadPlan, LoadResult, run_agents

CWD = "/home/bench/soak-project"
FACTS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def leg(url: str, plan: LoadPlan) -> tuple[LoadResult, float]:
    started = time.perf_counter()
    result = run_agents(url, plan)
    return result, time.perf_counter() - started


def check(db: Path) -> tuple[str, int, int]:
    """Integrity, the client's rows (one per answered request) and the rows of calls ember
    made on its own (shadow memory runs with the defaults: accounted apart, by origin)."""
    conn = connect(db, readonly=True).conn
    try:
        ok = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        count = "SELECT COUNT(*) FROM exchanges WHERE origin {} 'client'"
        rows = int(conn.execute(count.format("=")).fetchone()[0])
        own = int(conn.execute(count.format("!=")).fetchone()[0])
    finally:
        conn.close()
    return ok, rows, own


def seeded_home(embedder: Embedder) -> tuple[Path, Path]:
    """A fresh EMBER_HOME whose project already has memories (so every ask searches)."""
    home = Path(tempfile.mkdtemp(prefix="ember-soak-"))
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    db = ref.db_path(home)
    with HierarchicalMemory(db, embedder) as mem:
        for fact in FACTS:
            mem.add(fact, importance=0.8)
    return home, db


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    embedder = get_embedder()
    legs = {"ember": {}, "no memory": {"EMBER_MEMORY_MODE": "off"}}
    table: list[tuple[str, LoadResult, float]] = []
    stats: dict[str, dict[str, float]] = {}
    with BackgroundServer(Emulator()) as upstream, contextlib.ExitStack() as stack:
        proxies = {}
        for name, env in legs.items():
            home, db = seeded_home(embedder)
            settings = load_settings(
                env=env, home=home, anthropic_url=upstream.url, openai_url=upstream.url + "/v1"
            )
            app = build_app(settings)
            proxies[name] = (app, stack.enter_context(BackgroundServer(app)), db, [0])
        for r in range(args.rounds):
            plan = LoadPlan(args.agents, args.turns, CWD, f"direct{r}", deadline_seconds=600)
            table.append(("direct", *leg(upstream.url, plan)))
            for name, (app, proxy, db, expected) in proxies.items():
                plan = LoadPlan(args.agents, args.turns, CWD, f"{name}{r}", deadline_seconds=600)
                result, wall = leg(proxy.url, plan)
                table.append((name, result, wall))
                assert proxy.loop is not None  # response stages first, then their writes
                asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(60)
                app.storage.flush(60)
                expected[0] += result.answered
                ok, rows, own = check(db)
                print(
                    f"round {r}, {name}: integrity {ok}, client rows {rows} / answered "
                    f"{expected[0]} (+{own} rows of ember's own calls)"
                )
        for name, (app, _, db, _) in proxies.items():
            stats[name] = app.storage.database(db).stats.summary()
    report(table, stats, args)


def report(
    table: list[tuple[str, LoadResult, float]],
    stats: dict[str, dict[str, float]],
    args: argparse.Namespace,
) -> None:
    print(f"\n{args.agents} agents x {args.turns} turns x {args.rounds} rounds, one project")
    print(f"{'leg':10} {'answered':>9} {'failed':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    sums: dict[str, list[float]] = {}
    for name, result, wall in table:
        rate = result.answered / wall
        sums.setdefault(name, []).append(rate)
        lat = [x * 1000 for x in result.latencies]
        print(
            f"{name:10} {result.answered:9d} {result.failed:7d} {rate:8.1f} "
            f"{pct(lat, 0.5):8.1f} {pct(lat, 0.99):8.1f}"
        )
    direct = statistics.mean(sums.pop("direct"))
    print()
    for name, rates in sums.items():
        mean = statistics.mean(rates)
        print(f"throughput {name} / direct: {mean / direct:.2f} ({mean:.1f} vs {direct:.1f} req/s)")
    keys = ("jobs", "batches", "jobs_per_batch", "commit_wait_p50_ms", "commit_wait_p99_ms",
            "commit_wait_max_ms")  # fmt: skip
    print("\ndatabase writer (project file) " + " ".join(f"{n:>12}" for n in stats))
    for key in keys:
        print(f"  {key:28} " + " ".join(f"{stats[n].get(key, float('nan')):12.2f}" for n in stats))


if __name__ == "__main__":
    main()
