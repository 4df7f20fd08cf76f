"""Storage under load: several agents on one project, memory and shaping on.

The same load (``ember.testing.load``: N agents x M turns, JSON and streaming, Anthropic and
OpenAI SDKs) runs first straight at the provider emulator, then through the proxy with every
feature on and a seeded project memory. Printed side by side: requests per second, latency
per request, and the proxy's database writer — commits, jobs per transaction and how long a
write waited from its submission to its commit (the window a ``kill -9`` can lose). After each
round: ``PRAGMA integrity_check`` and client rows == answered requests (ember's own calls,
shadow memory with the defaults, are rows of their own origin and counted apart).

    python bench/storage_soak.py [--agents 8] [--turns 25] [--rounds 3]

Loopback only; every loop is bounded by its turns and a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ember.compose import build_app
from ember.config import load_settings
from ember.memory import HierarchicalMemory
from ember.memory.embed import get_embedder
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ember-soak-"))
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    db = ref.db_path(home)
    embedder = get_embedder()
    with HierarchicalMemory(db, embedder) as mem:
        for fact in FACTS:
            mem.add(fact, importance=0.8)
    emulator = Emulator()
    rows_expected = 0
    table: list[tuple[str, LoadResult, float]] = []
    with BackgroundServer(emulator) as upstream:
        settings = load_settings(
            env={}, home=home, anthropic_url=upstream.url, openai_url=upstream.url + "/v1"
        )
        app = build_app(settings)
        with BackgroundServer(app) as proxy:
            for r in range(args.rounds):
                plan = LoadPlan(args.agents, args.turns, CWD, f"direct{r}", deadline_seconds=600)
                table.append(("direct", *leg(upstream.url, plan)))
                plan = LoadPlan(args.agents, args.turns, CWD, f"proxy{r}", deadline_seconds=600)
                result, wall = leg(proxy.url, plan)
                table.append(("ember", result, wall))
                assert proxy.loop is not None  # response stages first, then their writes
                asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(60)
                app.storage.flush(60)
                rows_expected += result.answered
                ok, rows, own = check(db)
                print(
                    f"round {r}: integrity {ok}, client rows {rows} / answered {rows_expected}"
                    f" (+{own} rows of ember's own calls)"
                )
            stats = app.storage.database(db).stats.summary()
    report(table, stats, args)


def report(
    table: list[tuple[str, LoadResult, float]], stats: dict[str, float], args: argparse.Namespace
) -> None:
    print(f"\n{args.agents} agents x {args.turns} turns x {args.rounds} rounds, one project")
    print(f"{'leg':8} {'answered':>9} {'failed':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    sums: dict[str, list[float]] = {"direct": [], "ember": []}
    for name, result, wall in table:
        rate = result.answered / wall
        sums[name].append(rate)
        lat = [x * 1000 for x in result.latencies]
        print(
            f"{name:8} {result.answered:9d} {result.failed:7d} {rate:8.1f} "
            f"{pct(lat, 0.5):8.1f} {pct(lat, 0.99):8.1f}"
        )
    direct, ember = statistics.mean(sums["direct"]), statistics.mean(sums["ember"])
    print(f"\nthroughput ember / direct: {ember / direct:.2f} ({ember:.1f} vs {direct:.1f} req/s)")
    print("database writer (project file):")
    for key in ("jobs", "batches", "jobs_per_batch", "commit_wait_p50_ms",
                "commit_wait_p99_ms", "commit_wait_max_ms"):  # fmt: skip
        if key in stats:
            print(f"  {key:20} {stats[key]:10.2f}")


if __name__ == "__main__":
    main()
