"""Several proxies, one PostgreSQL (issues #24, #37): a team's proxies writing one project at
once, on a good day and on a bad one.

Three ``ember proxy`` processes, each with an ``EMBER_HOME`` of its own (three machines), all
with ``EMBER_STORE_URL`` on one PostgreSQL (the test setup's, ``ember.testing.postgres``, or
``$EMBER_TEST_PG_URL``'s), in front of one provider emulator. Each round, 4 agents per proxy
work on project A at once (``bench/support/load.py``: both SDKs, JSON and streams) while 2 more
agents work on project B through the first proxy. Both projects hold memories whose text
names their project (``[alpha]``/``[beta]``), so an injection of the wrong project's fact is
visible in what the provider received. Shadow memory fires during the load (a session is
read after a second of quiet) and the emulator, playing the model, proposes each ask as a
fact, so shadow runs, proposals and memories are written while accounting rows are.

The bad day: in each of ``--outage-rounds`` the server is stopped (a fast shutdown: every
connection cut) ``--outage-after`` seconds in and started again ``--outage-seconds`` later,
while the agents go on (a local server only: ``pg_restart``). In ``--kill-round`` the third
proxy is killed with SIGKILL ``--kill-after`` seconds in, mid-request (by default while the
server is down, holding writes); it is started again (same home) as soon as the round's
agents are done, and delivers what its journal kept.

After every round, once no row count has moved for 6 s, on the server (``pg_soak_checks``):
per proxy, its sessions' accounting rows, memory ledger rows and transcript messages against
the requests its agents were answered (exact, the killed proxy's included: what it answered
and had not written is in its journal; ``lost at kill`` is what the answer journal found
answered with no row; its ledger may hold one more row per ask in flight at the kill), every
user message a completed shadow run read proposed once and none twice, every valid proposal
a memory, no constraint left unvalidated, the memory indexes agreeing with the memories
(``memory.index.pg_check``), every valid shadow proposal's evidence in its own session, no
request of one project carrying the other's memory, and at most ``MAX_LINES`` warning/error
lines per proxy. The last line says which checks were off, if any. At the end a new session
on the second proxy asks what the first proxy's shadow learned: the fact it stored is
injected. Then what the soak wrote: rows and bytes per request, the basis of
``docs/scale.md``; and the spend-limit legs of ``bench/budget_soak.py`` on the same server.

    python bench/pg_soak.py [--turns 60] [--rounds 3] [--kill-round 1] [--kill-after 2.5]
        [--outage-rounds 1,2] [--outage-after 1.0] [--outage-seconds 6] [--no-budget]
        [--log-level info]

Loopback only; every load is bounded by its turns and a deadline, every wait by a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import ProxyProcess
from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.pg.database import PgDatabase
from ember.store.pg.names import schema_name
from ember.store.schema import PROJECT, for_postgres
from ember.testing import Emulator
from ember.testing.postgres import postgres_server
from ember.testing.shadow import Line, shadow_replies
from pg_restart import Restartable
from pg_soak_checks import (
    CWD_A,
    CWD_B,
    LogWatch,
    integrity,
    leaks,
    on_server,
    proposals,
    scalar,
    verdict,
    written,
)
from support.load import LoadPlan, LoadResult, run_agents, session_id

FACTS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]
AGENTS, B_AGENTS, PROXIES = 4, 2, 3
#: Warning and error lines a proxy may log in a round (one outage: the promise is one line
#: when the server goes and one when it is back, and the few a feature says once).
MAX_LINES = 8


def every_ask(lines: Sequence[Line], session: str) -> list[dict[str, Any]]:
    """The model's side of a shadow read: each ask the user made is a fact to keep, named
    with its session (the agents of every proxy ask alike: one fact per session's ask)."""
    return [
        {"content": f"The user asked: {line.text} [session {session[:8]}]",
         "evidence": [{"kind": "user-stated", "messageId": line.id}]}
        for line in lines if line.kind == "user"
    ]  # fmt: skip


@dataclass
class Proxy(ProxyProcess):
    """One ``ember proxy`` process of the soak, numbered (its log ``proxy<index>.log``)."""

    index: int = 0


def seed(url: str, home: Path, cwd: str, label: str) -> str:
    """The project at ``cwd`` holding ``FACTS`` marked with ``label``; its schema."""
    ref = resolve_project({}, None, f"Working directory: {cwd}")
    assert ref is not None
    path = ref.db_path(home)
    schema = schema_name(home, path)
    db = PgDatabase(path, for_postgres(PROJECT), url=url, schema_name=schema, log_failures=False)
    try:
        with HierarchicalMemory(db, get_embedder()) as mem:
            for fact in FACTS:
                mem.add(f"[{label}] {fact}", importance=0.8)
    finally:
        db.close()
    return schema


#: Tables whose rows arrive after the load's last turn: held writes delivered, the killed
#: proxy's journal, shadow reads of sessions gone quiet.
_SETTLING = ("exchanges", "memory_injections", "transcript_messages", "memories",
             "shadow_memory_runs", "shadow_fact_proposals")  # fmt: skip


def settle(url: str, schemas: Sequence[str], timeout: float = 90.0, quiet: float = 6.0) -> None:
    """Wait until no row count moves for ``quiet`` seconds (held writes delivered, shadow
    reads done: after an outage a session's read comes a few seconds after its rows)."""
    deadline, last, still = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        with on_server(url) as conn:
            now = tuple(
                scalar(conn, f"SELECT COUNT(*) FROM {s}.{table}")
                for s in schemas
                for table in _SETTLING
                if scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", f"{s}.{table}")
            )
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet:
            return
        time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kill-round", type=int, default=1, help="-1: kill no proxy")
    ap.add_argument("--kill-after", type=float, default=2.5)
    ap.add_argument("--outage-rounds", default="1,2", help="rounds the server is stopped in")
    ap.add_argument("--outage-after", type=float, default=1.0)
    ap.add_argument("--outage-seconds", type=float, default=6.0)
    ap.add_argument(
        "--shadow-idle", type=float, default=1.0,
        help="seconds of quiet before a session's shadow read (shipped: 60)",
    )  # fmt: skip
    ap.add_argument("--no-budget", action="store_true", help="skip the spend-limit legs")
    ap.add_argument("--log-level", default="warning", help="the proxies' (info: why, too)")
    args = ap.parse_args()
    args.outages = {int(x) for x in args.outage_rounds.split(",") if x.strip()}
    root = Path(tempfile.mkdtemp(prefix="ember-pg-soak-"))
    emulator = Emulator()
    emulator.reply_fn = shadow_replies(every_ask)
    with postgres_server() as pg, BackgroundServer(emulator) as upstream:
        server = Restartable(pg.pid, pg.data_dir) if pg.pid and pg.data_dir else None
        if server is None and args.outages:
            print("an external server ($EMBER_TEST_PG_URL) is never stopped: no outages")
            args.outages = set()
        try:
            with soak_database(pg, server) as url:
                run(args, url, root, emulator, upstream.url, server)
        finally:
            if server is not None:
                server.close()


def run(
    args: argparse.Namespace, url: str, root: Path, emulator: Emulator, upstream: str,
    server: Restartable | None,
) -> None:  # fmt: skip
    a = seed(url, root, CWD_A, "alpha")
    b = seed(url, root, CWD_B, "beta")
    proxies = [make_proxy(i, root, url, args.shadow_idle) for i in range(PROXIES)]
    try:
        for p in proxies:
            p.start(upstream, args.log_level)
        answered = soak(args, url, root, proxies, upstream, emulator, (a, b), server)
        crossed = across(url, a, proxies, emulator, answered["sessions"])
    finally:
        for p in proxies:
            p.stop()
    sizes(url, a, answered["total"])  # project A's schema, by A's requests
    print(f"\nshadow fact of proxy 0 injected by proxy 1 into a new session: {crossed}")
    misses = answered["misses"]
    print(f"\nchecks: {len(misses)} off" + "".join(f"\n    {m}" for m in misses)
          if misses else "\nchecks: every round exact, intact and quiet enough")  # fmt: skip
    if not args.no_budget:
        budget(url, root / "budget")


@contextlib.contextmanager
def soak_database(pg: Any, server: Restartable | None) -> Iterator[str]:
    """A database of the soak's own, with pgvector. On a server the soak restarts it is made
    and dropped here, on connections of its own (the test setup's admin connection does not
    survive a restart)."""
    if server is None:
        with pg.fresh_database() as url:
            yield url
        return
    import psycopg
    from psycopg import sql

    name = "ember_soak"
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(pg.template)))  # fmt: skip
    try:
        yield pg.database_url(name)
    finally:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))  # fmt: skip


def budget(url: str, root: Path) -> None:
    """Spend limits across three proxies on this server: a burst against a $0.05 limit (passed
    by at most one request's cost?), one proxy killed mid-burst (how long what it held still
    counts), and what a reservation adds to a request (``bench/budget_soak.py``)."""
    import budget_soak

    budget_soak.run_legs("postgres", url, root, budget_soak.options([]))


def make_proxy(i: int, root: Path, url: str, idle: float) -> Proxy:
    home = root / f"machine{i}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(home), "EMBER_STORE_URL": url,
            "EMBER_SHADOW_IDLE_SECONDS": str(idle), "EMBER_SHADOW_TICK_SECONDS": "1"}  # fmt: skip
    return Proxy(home, env, f"proxy{i}.log", index=i)


def one_round(
    r: int, args: argparse.Namespace, proxies: list[Proxy], server: Restartable | None
) -> tuple[list[LoadResult], LoadResult, list[list[str]], list[str]]:
    """All agents at once; the server stopped mid-round in an outage round, the third proxy
    killed mid-round in the kill round."""
    plans = [LoadPlan(AGENTS, args.turns, CWD_A, f"r{r}p{p.index}", deadline_seconds=600)
             for p in proxies]  # fmt: skip
    plan_b = LoadPlan(B_AGENTS, args.turns, CWD_B, f"r{r}b", deadline_seconds=600)
    results: list[LoadResult] = [LoadResult() for _ in proxies]
    result_b = [LoadResult()]

    def run(i: int) -> None:
        results[i] = run_agents(proxies[i].url, plans[i])

    def run_b() -> None:
        result_b[0] = run_agents(proxies[0].url, plan_b)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(proxies))]
    threads.append(threading.Thread(target=run_b))
    if r in args.outages and server is not None:
        threads.append(threading.Thread(target=outage, args=(r, args, server)))
    started = time.monotonic()
    for t in threads:
        t.start()
    if r == args.kill_round:
        time.sleep(max(0.0, args.kill_after - (time.monotonic() - started)))
        proxies[-1].kill()
        print(f"round {r}: proxy {proxies[-1].index} killed with SIGKILL at {args.kill_after}s")
    for t in threads:
        t.join(660)
    sessions = [[session_id(plan, i) for i in range(AGENTS)] for plan in plans]
    return results, result_b[0], sessions, [session_id(plan_b, i) for i in range(B_AGENTS)]


def outage(r: int, args: argparse.Namespace, server: Restartable) -> None:
    time.sleep(args.outage_after)
    took = server.stop()
    print(f"round {r}: PostgreSQL stopped at {args.outage_after}s (fast shutdown, {took:.1f}s)")
    time.sleep(args.outage_seconds)
    ready = server.start()
    print(
        f"round {r}: PostgreSQL started again after {args.outage_seconds}s (ready in {ready:.1f}s)"
    )


def soak(
    args: argparse.Namespace, url: str, root: Path, proxies: list[Proxy], upstream: str,
    emulator: Emulator, schemas: tuple[str, str], server: Restartable | None,
) -> dict[str, Any]:  # fmt: skip
    a, b = schemas
    total, first_sessions = 0, []  # every session proxy 0 served
    logs, misses = LogWatch(), []
    for r in range(args.rounds):
        started = time.perf_counter()
        results, result_b, sessions, sessions_b = one_round(r, args, proxies, server)
        wall = time.perf_counter() - started
        if r == args.kill_round:
            proxies[-1].start(upstream, args.log_level)  # delivers what its journal kept
        settle(url, schemas)
        first_sessions += sessions[0]
        with on_server(url) as conn:
            rows = [written(conn, a, s) for s in sessions]
            rows_b = written(conn, b, sessions_b)
            read = [proposals(conn, s) for s in schemas]
        lines = []
        for p, res, n in zip(proxies, results, rows, strict=True):
            was_killed = r == args.kill_round and p is proxies[-1]
            killed = ", killed" if was_killed else ""
            said = verdict(n, res.answered, in_flight=AGENTS if was_killed else 0)
            lines.append(f"round {r}, proxy {p.index}: answered {res.answered}, failed "
                         f"{res.failed}; {said}{killed}")  # fmt: skip
        lines.append(f"round {r}, project B via proxy 0: answered {result_b.answered}; "
                     f"{verdict(rows_b, result_b.answered)}")  # fmt: skip
        for s, shadow_read in zip(schemas, read, strict=True):
            found = integrity(url, root, s)
            lines.append(f"round {r}, {s}: integrity {found or 'ok'}; {shadow_read}")
        wrong, own_a, own_b = leaks(emulator)
        lines.append(f"round {r}: cross-project injections {wrong} (own: A {own_a}, B {own_b} "
                     "requests)" + (" (OFF)" if wrong else ""))  # fmt: skip
        lines.append(f"round {r}: {shadow_line(url, a)}; wall {wall:.1f}s")
        for line in lines:
            print(line)
            misses += [line] if "OFF" in line or "integrity {" in line else []
        for p in proxies:
            said = logs.complaints(p.log)
            bound = f" (OFF: more than {MAX_LINES})" if len(said) > MAX_LINES else ""
            misses += [f"round {r}, proxy {p.index}: {len(said)} log lines"] if bound else []
            print(f"round {r}, proxy {p.index}: {len(said)} warning/error lines{bound}"
                  + "".join(f"\n    {line[:160]}" for line in said))  # fmt: skip
        if r == args.kill_round:
            print(f"round {r}, proxy {proxies[-1].index}: {killed_line(proxies[-1])}")
        total += sum(x.answered for x in results)  # project A's
    return {"total": total, "sessions": first_sessions, "misses": misses}


def killed_line(proxy: Proxy) -> str:
    """What the restarted proxy found of its earlier run: answers without a row."""
    import urllib.request

    with urllib.request.urlopen(proxy.url + "/healthz", timeout=10) as answer:
        health = json.loads(answer.read())
    lost = sum(int(h.get("lost_at_kill") or 0) for h in health.get("storage", []))
    return f"after its restart: {lost} answered requests of the killed run have no row"


def shadow_line(url: str, schema: str) -> str:
    with on_server(url) as conn:
        if not scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", f"{schema}.shadow_memory_runs"):
            return "shadow: not on this store"
        why = "COALESCE(' (' || split_part(reason, ':', 1) || ')', '')"
        sql = f"SELECT status || {why}, COUNT(*) FROM {schema}.shadow_memory_runs GROUP BY 1"
        runs = dict(conn.execute(sql).fetchall())
        valid, proposed, became = conn.execute(
            f"SELECT COUNT(*) FILTER (WHERE validation_error IS NULL), COUNT(*), "
            f"COUNT(memory_id) FROM {schema}.shadow_fact_proposals").fetchone()  # fmt: skip
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(runs.items())) or "none"
    off = f" (OFF: {valid - became} valid proposals never became memories)" * (became < valid)
    return f"shadow runs {statuses}; proposals {valid} valid / {proposed}, {became} memories{off}"


def across(url: str, schema: str, proxies: list[Proxy], emulator: Emulator,
           sessions: Sequence[str]) -> str:  # fmt: skip
    """A new session on proxy 1 asks what one of proxy 0's sessions asked: are memories that
    proxy 0's shadow stored from its sessions in the request the provider got?

    Any of them counts, not one chosen row: every agent asks the same few questions, so a
    store holds many facts of the same words from different sessions, and which ten of
    those near-twins rank first (ties go to the newest) says nothing about crossing proxies.
    """
    ask, deadline = None, time.monotonic() + 60  # its session's read may still be coming
    while ask is None and time.monotonic() < deadline:
        with on_server(url) as conn:
            row = conn.execute(_SHADOW_FACT.format(schema=schema), (list(sessions),)).fetchone()
        ask = row[0] if row else None
        if ask is None:
            time.sleep(0.5)
    if ask is None:
        return f"no (proxy 0's shadow stored no memory from its {len(sessions)} sessions)"
    import support.load as load

    ids: list[str] = []
    for attempt in range(ACROSS_TRIES):  # memory skips asks while its CPU share is spent
        if attempt:
            time.sleep(10.0)
        before = len(emulator.requests)
        plan = LoadPlan(1, 1, CWD_A, f"across{attempt}", deadline_seconds=120)
        with _asks([str(ask).removeprefix("The user asked: ")], load):
            run_agents(proxies[1].url, plan)
        sent = " ".join(json.dumps(r.json()) for r in emulator.requests[before:])
        ids = sorted(set(re.findall(r"- \[([0-9a-f]{12})\]", sent)))
        if ids:
            break
    with on_server(url) as conn:
        theirs = conn.execute(
            f"SELECT COUNT(*) FROM {schema}.memories WHERE id = ANY(%s) AND "
            "metadata::jsonb ->> 'source' = 'shadow' AND metadata::jsonb ->> 'session' = ANY(%s)",
            (ids, list(sessions)),
        ).fetchone()[0]
    return f"{'yes' if theirs else 'no'} ({theirs} of {len(ids)} injected memories were stored " \
        f"by proxy 0's shadow from its own sessions; ask {attempt + 1})"  # fmt: skip


#: New sessions that ask (10 s apart) until one is given memories: a proxy's memory skips
#: asks while its share of the CPU is spent, as it is after the soak's rounds on 2 cores.
ACROSS_TRIES = 6

#: The first fact proxy 0's shadow stored from one of its sessions (``%s``: those sessions).
_SHADOW_FACT = (
    "SELECT content FROM {schema}.memories WHERE metadata::jsonb ->> 'session' = ANY(%s) "
    "AND metadata::jsonb ->> 'source' = 'shadow' ORDER BY seq LIMIT 1"
)


@contextlib.contextmanager
def _asks(asks: list[str], load: Any) -> Iterator[None]:
    saved = load.ASKS
    load.ASKS = asks
    try:
        yield
    finally:
        load.ASKS = saved


def sizes(url: str, schema: str, requests: int) -> None:
    """Rows and bytes (with indexes and TOAST) per table of project A, per request served."""
    with on_server(url) as conn:
        tables = conn.execute(
            "SELECT c.relname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname",
            (schema,),
        ).fetchall()
        print(f"\nproject A after {requests} requests in all ({schema}):")
        print(f"{'table':32} {'rows':>9} {'MB':>8} {'rows/req':>9} {'bytes/req':>10}")
        total_rows = total_bytes = 0
        for name, oid in tables:
            rows = int(scalar(conn, f"SELECT COUNT(*) FROM {schema}.{name}"))
            size = int(scalar(conn, "SELECT pg_total_relation_size(%s)", oid))
            total_rows, total_bytes = total_rows + rows, total_bytes + size
            if rows:
                print(f"{name:32} {rows:9d} {size / 1e6:8.2f} {rows / requests:9.2f} "
                      f"{size / requests:10.0f}")  # fmt: skip
        print(f"{'all':32} {total_rows:9d} {total_bytes / 1e6:8.2f} {total_rows / requests:9.2f} "
              f"{total_bytes / requests:10.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
