"""Storage under load: several agents on one project, memory and shaping on.

The same load (``bench/support/load.py``: N agents x M turns, JSON and streaming, Anthropic and
OpenAI SDKs) runs first straight at the provider emulator, then through the proxy with the
defaults (shaping, memory ``auto_tail``, shadow memory, accounting) on a seeded project memory,
then through a second proxy with memory off (what the memory search costs per ask). Printed
side by side: requests per second, latency per request, the process's CPU time per request
(load generator, emulator and proxies share the process: a proxy leg minus the direct leg is
what the proxy spent), and the proxy's database writer — commits, jobs per transaction and how
long a write waited from its submission to its commit (the window a ``kill -9`` can lose).
After each round: ``PRAGMA integrity_check`` and client rows == answered requests (ember's own
calls, shadow memory with the defaults, are rows of their own origin and counted apart).
A warm-up against every target first (2 agents x 2 turns on another project, not counted) takes
the SDK imports and first connections out of round 0's direct leg.

Two more legs split the memory search's cost (``--legs``, all proxies built alike otherwise):
``free embedding`` gives that proxy's memory a constant vector instead of running the model (the
ceiling of any speed-up of the embedding: batching, another runtime), and ``ask-only query``
embeds only the last part of the query input, the user's text, without the assistant turns
and tool outputs before it (what a shorter query input would cost; says nothing of quality).

Three legs keep everything on PostgreSQL instead of files (issue #24): ``ember on postgres``,
``no memory on postgres`` and ``shadow firing on postgres``, on a server the test setup
starts (``ember.testing.postgres``) or ``$EMBER_TEST_PG_URL``'s, a database each; their
integrity is the memory indexes' agreement with the memories (``memory.index.pg_check``).

    python bench/storage_soak.py [--agents 8] [--turns 25] [--rounds 3]
        [--legs "ember,no memory,shadow firing,free embedding,ask-only query,
                 ember on postgres,no memory on postgres,shadow firing on postgres"]

Loopback only; every loop is bounded by its turns and a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ember.compose import build_app, build_stages
from ember.config import Settings, load_settings
from ember.embedder import Embedder, get_embedder
from ember.exchange import Stage
from ember.memory import HierarchicalMemory
from ember.memory.stage import MemoryStage
from ember.project import resolve_project
from ember.proxy.app import ProxyApp
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.store.registry import Storage
from ember.testing import Emulator
from ember.testing.shadow import Line, shadow_replies
from support.load import LoadPlan, LoadResult, run_agents

CWD = "/home/bench/soak-project"
FACTS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]


class FreeEmbedding:
    """Every text gets one constant unit vector, computed once: embedding costs nothing."""

    def __init__(self, inner: Embedder) -> None:
        self.name, self.dim = inner.name, inner.dim
        self._row = np.asarray(inner.embed([FACTS[0]]), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.repeat(self._row, len(texts), axis=0)


class AskOnlyQuery:
    """Embeds only what follows the last blank line: for a query input (context parts, then
    the user's text, joined by blank lines) the user's text; a memory is usually one part."""

    def __init__(self, inner: Embedder) -> None:
        self.name, self.dim, self._inner = inner.name, inner.dim, inner

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._inner.embed([t.rsplit("\n\n", 1)[-1] for t in texts])


@dataclass(frozen=True)
class Leg:
    env: dict[str, str]
    #: wraps the shared embedder for this proxy's memory (None: the shared one, as shipped)
    embedder: Callable[[Embedder], Embedder] | None = None
    #: everything on PostgreSQL (``store_url``), not in files
    postgres: bool = False


LEGS = {
    "ember": Leg({}),
    "no memory": Leg({"EMBER_MEMORY_MODE": "off"}),
    # Shadow memory firing during the load: a session is read once it has been quiet a second
    # (shipped: a minute, which a round's back-to-back turns never leave it), so its runs,
    # proposals and promoted memories are written while other agents' rows are.
    "shadow firing": Leg({"EMBER_SHADOW_IDLE_SECONDS": "1", "EMBER_SHADOW_TICK_SECONDS": "1"}),
    "free embedding": Leg({}, FreeEmbedding),
    "ask-only query": Leg({}, AskOnlyQuery),
    "ember on postgres": Leg({}, postgres=True),
    "no memory on postgres": Leg({"EMBER_MEMORY_MODE": "off"}, postgres=True),
    "shadow firing on postgres": Leg(
        {"EMBER_SHADOW_IDLE_SECONDS": "1", "EMBER_SHADOW_TICK_SECONDS": "1"}, postgres=True
    ),
}


@dataclass(frozen=True)
class Store:
    """Where a leg's project lives: its file, or (``url`` set) the schema that file maps to."""

    db: Path
    home: Path
    url: str | None = None

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.url is None:
            conn = connect(self.db, readonly=True).conn
            try:
                return [tuple(r) for r in conn.execute(sql).fetchall()]
            finally:
                conn.close()
        import psycopg

        from ember.store.pg.names import schema_name

        with psycopg.connect(self.url, autocommit=True) as pg:
            pg.execute(f"SET search_path TO {schema_name(self.home, self.db)}")
            return [tuple(r) for r in pg.execute(sql).fetchall()]

    def integrity(self) -> str:
        """SQLite's integrity check, or the PostgreSQL memory indexes' agreement."""
        if self.url is None:
            return str(self.query("PRAGMA integrity_check")[0][0])
        from ember.memory.index.pg_check import problems

        found = problems(_Cursorish(self))
        return "ok" if not found else str(found)


class _Cursorish:
    """``conn.execute(sql).fetchone()`` over ``Store.query`` (what ``pg_check`` calls)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def execute(self, sql: str) -> Any:
        rows = self._store.query(sql)

        class _Rows:
            def fetchone(self) -> Any:
                return rows[0] if rows else None

        return _Rows()


def stages_with(embedder: Embedder | None) -> Callable[[Settings, Storage], list[Stage]]:
    """``build_stages``, the memory stage's stores given ``embedder`` when there is one."""

    def build(settings: Settings, storage: Storage) -> list[Stage]:
        stages = build_stages(settings, storage)
        for stage in stages:
            if embedder is not None and isinstance(stage, MemoryStage):
                stage.router._embedder = embedder  # before any store is opened
        return stages

    return build


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds() -> float:
    """CPU time of the whole process, every thread (onnxruntime's own included)."""
    t = os.times()
    return t.user + t.system


def leg(url: str, plan: LoadPlan) -> tuple[LoadResult, float, float]:
    """The load's result, its wall time and the process's CPU time meanwhile."""
    started, cpu = time.perf_counter(), cpu_seconds()
    result = run_agents(url, plan)
    return result, time.perf_counter() - started, cpu_seconds() - cpu


def check(store: Store) -> tuple[str, int, int]:
    """Integrity, the client's rows (one per answered request) and the rows of calls ember
    made on its own (shadow memory runs with the defaults: accounted apart, by origin)."""
    count = "SELECT COUNT(*) FROM exchanges WHERE origin {} 'client'"
    rows = int(store.query(count.format("="))[0][0])
    own = int(store.query(count.format("!="))[0][0])
    return store.integrity(), rows, own


def every_ask(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
    """The load's asks are questions, which the shipped chooser rightly never proposes: for
    the soak each one is a fact, so shadow reads write proposals and memories under load."""
    return [
        {
            "content": f"The user asked: {line.text}",
            "evidence": [{"kind": "user-stated", "messageId": line.id}],
        }
        for line in lines
        if line.kind == "user"
    ]


def memory_counts(app: ProxyApp) -> str:
    """How the memory stage fared: asks turned away with every search slot busy (they went on
    without memories), and query vectors computed against reused (the load's agents ask the
    same six asks: far more reuse than real sessions get)."""
    stage = next((s for s in app.pipeline.stages if isinstance(s, MemoryStage)), None)
    if stage is None:
        return "memory off"
    store = stage.router.open_store(resolve_project({}, None, f"Working directory: {CWD}"))
    queries = store.query_vectors if store is not None else None
    reused = "?" if queries is None else f"{queries.computed} computed, {queries.reused} reused"
    return (
        f"{stage.gate.turned_away} asks went without memories (memory at capacity); "
        f"query vectors {reused}"
    )


def shadow_counts(store: Store) -> str:
    """Shadow runs by status, proposals (valid / all) and the memories they became."""
    try:
        runs = dict(store.query("SELECT status, COUNT(*) FROM shadow_memory_runs GROUP BY status"))
    except Exception:  # a store without shadow's tables (a feature not on PostgreSQL yet)
        return "shadow: no tables"
    [(valid, proposed, promoted)] = store.query(
        "SELECT COUNT(*) FILTER (WHERE validation_error IS NULL), COUNT(*), COUNT(memory_id) "
        "FROM shadow_fact_proposals"
    )
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(runs.items())) or "none"
    return (
        f"shadow runs: {statuses}; proposals {valid or 0} valid / {proposed}, "
        f"{promoted} became memories"
    )


def seeded_home(embedder: Embedder, url: str | None = None) -> Store:
    """A fresh EMBER_HOME whose project already has memories (so every ask searches): in
    its file, or with ``url`` in the schema that file maps to."""
    home = Path(tempfile.mkdtemp(prefix="ember-soak-"))
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    db = ref.db_path(home)
    store = Storage(home, store_url=url)
    try:
        with HierarchicalMemory(store.database(db), embedder) as mem:
            for fact in FACTS:
                mem.add(fact, importance=0.8)
    finally:
        store.close()
    return Store(db, home, url)


Proxies = dict[str, tuple[ProxyApp, BackgroundServer, Store, list[int]]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--legs", default="ember,no memory", help=f"some of: {', '.join(LEGS)}")
    args = ap.parse_args()
    legs = [name.strip() for name in args.legs.split(",")]
    if not legs or any(name not in LEGS for name in legs):
        ap.error(f"--legs takes some of: {', '.join(LEGS)}")
    table: list[tuple[str, LoadResult, float, float]] = []
    stats: dict[str, dict[str, float]] = {}
    emulator = Emulator()
    emulator.reply_fn = shadow_replies(every_ask)  # the model's side of a shadow read
    # The databases outlive the proxies: what they left is read after they stopped.
    with contextlib.ExitStack() as databases:
        with BackgroundServer(emulator) as upstream, contextlib.ExitStack() as stack:
            proxies = open_legs(legs, upstream.url, stack, databases)
            warm = LoadPlan(2, 2, "/home/bench/warm-up", "warm-up", deadline_seconds=60)
            for url in [upstream.url, *(proxy.url for _, proxy, _, _ in proxies.values())]:
                run_agents(url, warm)
            for r in range(args.rounds):
                table += one_round(r, args, upstream.url, proxies)
            for name, (app, _, db, _) in proxies.items():
                stats[name] = app.storage.database(db.db).stats.summary()
                print(f"{name}: {memory_counts(app)}")
        # The proxies have stopped (reading what was unread): the stores as they were left.
        for name, (_, _, db, expected) in proxies.items():
            ok, rows, own = check(db)
            print(
                f"after stopping, {name}: integrity {ok}, client rows {rows} / answered "
                f"{expected[0]} (+{own} rows of ember's own calls); {shadow_counts(db)}"
            )
    report(table, stats, args)


def open_legs(
    legs: list[str], upstream: str, stack: contextlib.ExitStack, databases: contextlib.ExitStack
) -> Proxies:
    """A proxy per leg on a seeded project (a PostgreSQL database of its own for the
    PostgreSQL legs, on one server started for the first of them)."""
    embedder = get_embedder()
    proxies: Proxies = {}
    pg = None
    for name in legs:
        url = None
        if LEGS[name].postgres:
            if pg is None:
                from ember.testing.postgres import postgres_server

                pg = databases.enter_context(postgres_server())
            url = databases.enter_context(pg.fresh_database())
        db = seeded_home(embedder, url)
        settings = load_settings(
            env=LEGS[name].env,
            home=db.home,
            anthropic_url=upstream,
            openai_url=upstream + "/v1",
            store_url=url,
        )
        wrap = LEGS[name].embedder
        app = build_app(settings, stages_with(wrap(embedder) if wrap else None))
        proxies[name] = (app, stack.enter_context(BackgroundServer(app)), db, [0])
    return proxies


def one_round(
    r: int, args: argparse.Namespace, upstream: str, proxies: Proxies
) -> list[tuple[str, LoadResult, float, float]]:
    """The load straight at the emulator, then through each proxy; each proxy's store
    checked after its leg."""
    plan = LoadPlan(args.agents, args.turns, CWD, f"direct{r}", deadline_seconds=600)
    table = [("direct", *leg(upstream, plan))]
    for name, (app, proxy, db, expected) in proxies.items():
        plan = LoadPlan(args.agents, args.turns, CWD, f"{name}{r}", deadline_seconds=600)
        result, wall, cpu = leg(proxy.url, plan)
        table.append((name, result, wall, cpu))
        assert proxy.loop is not None  # response stages first, then their writes
        asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(60)
        app.storage.flush(60)
        expected[0] += result.answered
        ok, rows, own = check(db)
        print(
            f"round {r}, {name}: integrity {ok}, client rows {rows} / answered "
            f"{expected[0]} (+{own} rows of ember's own calls); {shadow_counts(db)}"
        )
    return table


def report(
    table: list[tuple[str, LoadResult, float, float]],
    stats: dict[str, dict[str, float]],
    args: argparse.Namespace,
) -> None:
    print(f"\n{args.agents} agents x {args.turns} turns x {args.rounds} rounds, one project")
    print(
        f"{'leg':22} {'answered':>9} {'failed':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cpu ms/req':>11}"
    )
    sums: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for name, result, wall, cpu in table:
        rate = result.answered / wall
        sums.setdefault(name, []).append(rate)
        cpus.setdefault(name, []).append(cpu / max(1, result.answered))
        lat = [x * 1000 for x in result.latencies]
        print(
            f"{name:22} {result.answered:9d} {result.failed:7d} {rate:8.1f} "
            f"{pct(lat, 0.5):8.1f} {pct(lat, 0.99):8.1f} {cpus[name][-1] * 1000:11.1f}"
        )
    direct_rates = sums.pop("direct")
    direct = statistics.mean(direct_rates)
    direct_cpu = statistics.mean(cpus.pop("direct"))
    print()
    for name, rates in sums.items():
        mean = statistics.mean(rates)
        ratios = " ".join(f"{x / d:.2f}" for x, d in zip(rates, direct_rates, strict=True))
        print(
            f"throughput {name} / direct: {mean / direct:.2f} ({mean:.1f} vs {direct:.1f} req/s; "
            f"rounds {ratios}); cpu per request over direct "
            f"{(statistics.mean(cpus[name]) - direct_cpu) * 1000:+.1f} ms"
        )
    keys = ("jobs", "batches", "jobs_per_batch", "commit_wait_p50_ms", "commit_wait_p99_ms",
            "commit_wait_max_ms")  # fmt: skip
    print("\ndatabase writer (project file) " + " ".join(f"{n:>14}" for n in stats))
    for key in keys:
        print(f"  {key:28} " + " ".join(f"{stats[n].get(key, float('nan')):14.2f}" for n in stats))


if __name__ == "__main__":
    main()
