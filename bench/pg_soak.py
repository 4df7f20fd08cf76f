"""Several proxies, one PostgreSQL (issue #24): a team's proxies writing one project at once.

Three ``ember proxy`` processes, each with an ``EMBER_HOME`` of its own (three machines), all
with ``EMBER_STORE_URL`` on one PostgreSQL (the test setup's, ``ember.testing.postgres``, or
``$EMBER_TEST_PG_URL``'s), in front of one provider emulator. Each round, 4 agents per proxy
work on project A at once (``ember.testing.load``: both SDKs, JSON and streams) while 2 more
agents work on project B through the first proxy. Both projects hold memories whose text
names their project (``[alpha]``/``[beta]``), so an injection of the wrong project's fact is
visible in what the provider received. Shadow memory fires during the load (a session is
read after a second of quiet) and the emulator, playing the model, proposes each ask as a
fact, so shadow runs, proposals and memories are written while accounting rows are.

In round ``--kill-round`` the third proxy is killed with SIGKILL ``--kill-after`` seconds in,
while its agents are mid-request; it is started again (same home) for the next round.

After every round, on the server: client rows per proxy against the requests each answered
(equal for the proxies that lived; for the killed one, at most its answers: what it had not
committed is lost, never half-written), no constraint left unvalidated, the memory indexes
agreeing with the memories (``memory.index.pg_check``), every valid shadow proposal's
evidence in its own session, and no request of one project carrying the other's memory.
At the end a new session on the second proxy asks what the first proxy's shadow learned:
the fact it stored is injected. Then what the soak wrote: rows and bytes per request, the
basis of ``docs/scale.md``. Last, spend limits across three proxies on the same server
(``budget``: ``bench/budget_soak.py``'s legs, ``--no-budget`` to skip them).

    python bench/pg_soak.py [--turns 30] [--rounds 3] [--kill-round 1] [--kill-after 1.5]
                            [--no-budget]

Loopback only; every load is bounded by its turns and a deadline, every wait by a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import EMBER, wait_healthy
from ember.memory import HierarchicalMemory
from ember.memory.index.pg_check import problems
from ember.models import get_embedder
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.pg.database import PgDatabase
from ember.store.pg.names import schema_name
from ember.store.schema import PROJECT, for_postgres
from ember.testing import Emulator
from ember.testing.load import LoadPlan, LoadResult, run_agents, session_id
from ember.testing.postgres import postgres_server
from ember.testing.shadow import Line, shadow_replies

CWD_A, CWD_B = "/home/team/alpha-api", "/home/team/beta-web"
FACTS = [
    "The project uses PostgreSQL 16, configured in config/database.yml.",
    "Releases deploy to eu-west-1 through the deploy workflow on tags.",
    "Tests run with pytest -q from the repository root.",
    "Empty passwords must be rejected with a 400 by the login handler.",
]
AGENTS, B_AGENTS, PROXIES = 4, 2, 3


def every_ask(lines: Sequence[Line], session: str) -> list[dict[str, Any]]:
    """The model's side of a shadow read: each ask the user made is a fact to keep, named
    with its session (the agents of every proxy ask alike: one fact per session's ask)."""
    return [
        {"content": f"The user asked: {line.text} [session {session[:8]}]",
         "evidence": [{"kind": "user-stated", "messageId": line.id}]}
        for line in lines if line.kind == "user"
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Proxy:
    """One ``ember proxy`` process: its home, port and log; started and killed at will."""

    index: int
    home: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, upstream: str) -> None:
        argv = [EMBER, "proxy", "--port", str(self.port), "--anthropic-url", upstream,
                "--openai-url", upstream + "/v1", "--log-level", "warning"]  # fmt: skip
        log = open(self.home / f"proxy{self.index}.log", "ab")  # noqa: SIM115 (the child's)
        self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        import asyncio

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


@contextlib.contextmanager
def on_server(url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def scalar(conn: Any, sql: str, *params: Any) -> Any:
    return conn.execute(sql, params).fetchone()[0]


def settle(url: str, schemas: Sequence[str], timeout: float = 90.0) -> None:
    """Wait until no row count moves for 3 s (shadow reads after the load's last turn)."""
    deadline, last, still = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        with on_server(url) as conn:
            count = "SELECT (SELECT COUNT(*) FROM {0}.exchanges)"
            count += " + (SELECT COUNT(*) FROM {0}.memories)"
            now = tuple(scalar(conn, count.format(s)) for s in schemas)
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= 3.0:
            return
        time.sleep(0.5)


def client_rows(conn: Any, schema: str, sessions: Sequence[str]) -> int:
    sql = f"SELECT COUNT(*) FROM {schema}.exchanges "
    sql += "WHERE origin = 'client' AND session_id = ANY(%s)"
    return int(scalar(conn, sql, list(sessions)))


def integrity(url: str, home: Path, schema: str) -> dict[str, int]:
    """What should not exist in ``schema``: unvalidated constraints, memory index rows that
    disagree with the memories, valid shadow evidence outside its own session."""
    found: dict[str, int] = {}
    with on_server(url) as conn:
        n = scalar(conn, "SELECT COUNT(*) FROM pg_constraint c JOIN pg_namespace n ON "
                         "n.oid = c.connamespace WHERE n.nspname = %s AND NOT c.convalidated",
                   schema)  # fmt: skip
        if n:
            found["unvalidated constraints"] = int(n)
        if scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", f"{schema}.shadow_proposal_evidence"):
            n = scalar(conn, f"""SELECT COUNT(*) FROM {schema}.shadow_proposal_evidence e
                JOIN {schema}.shadow_fact_proposals p ON p.id = e.proposal_id
                LEFT JOIN {schema}.transcript_messages t ON t.id = e.message_id
                WHERE p.validation_error IS NULL AND e.message_id IS NOT NULL
                  AND t.session_id IS DISTINCT FROM p.session_id""")  # fmt: skip
            if n:
                found["valid evidence outside its session"] = int(n)
    path = home / "projects" / "x-0000000000000000" / "ember.db"  # the schema is given
    db = PgDatabase(path, for_postgres(PROJECT), url=url, schema_name=schema, log_failures=False)
    try:
        found |= db.read(problems)
    finally:
        db.close()
    return found


def leaks(emulator: Emulator) -> tuple[int, int, int]:
    """Requests of one project carrying the other's memory; and how many of each project's
    requests carried one of its own (the check has teeth only when both are non-zero)."""
    wrong = own_a = own_b = 0
    for request in list(emulator.requests):
        text = json.dumps(request.json())
        if CWD_A in text:
            wrong += "[beta]" in text
            own_a += "[alpha]" in text
        elif CWD_B in text:
            wrong += "[alpha]" in text
            own_b += "[beta]" in text
    return wrong, own_a, own_b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kill-round", type=int, default=1, help="-1: kill no proxy")
    ap.add_argument("--kill-after", type=float, default=1.5)
    ap.add_argument(
        "--shadow-idle", type=float, default=1.0,
        help="seconds of quiet before a session's shadow read (shipped: 60)",
    )  # fmt: skip
    ap.add_argument("--no-budget", action="store_true", help="skip the spend-limit legs")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ember-pg-soak-"))
    emulator = Emulator()
    emulator.reply_fn = shadow_replies(every_ask)
    with postgres_server() as pg, pg.fresh_database() as url, \
            BackgroundServer(emulator) as upstream:  # fmt: skip
        a = seed(url, root, CWD_A, "alpha")
        b = seed(url, root, CWD_B, "beta")
        proxies = [make_proxy(i, root, url, args.shadow_idle) for i in range(PROXIES)]
        try:
            for p in proxies:
                p.start(upstream.url)
            answered = soak(args, url, root, proxies, upstream.url, emulator, (a, b))
            crossed = across(url, a, proxies, emulator, answered["sessions"])
        finally:
            for p in proxies:
                p.stop()
        sizes(url, a, answered["total"])  # project A's schema, by A's requests
        print(f"\nshadow fact of proxy 0 injected by proxy 1 into a new session: {crossed}")
        if not args.no_budget:
            budget(url, root / "budget")


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
    return Proxy(i, home, env)


def one_round(
    r: int, args: argparse.Namespace, proxies: list[Proxy]
) -> tuple[list[LoadResult], LoadResult, list[list[str]], list[str]]:
    """All agents at once; the third proxy killed mid-round in the kill round."""
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
    for t in threads:
        t.start()
    if r == args.kill_round:
        time.sleep(args.kill_after)
        proxies[-1].kill()
        print(f"round {r}: proxy {proxies[-1].index} killed with SIGKILL at {args.kill_after}s")
    for t in threads:
        t.join(660)
    sessions = [[session_id(plan, i) for i in range(AGENTS)] for plan in plans]
    return results, result_b[0], sessions, [session_id(plan_b, i) for i in range(B_AGENTS)]


def soak(
    args: argparse.Namespace, url: str, root: Path, proxies: list[Proxy], upstream: str,
    emulator: Emulator, schemas: tuple[str, str],
) -> dict[str, Any]:  # fmt: skip
    a, b = schemas
    total, first_sessions = 0, []  # every session proxy 0 served
    for r in range(args.rounds):
        started = time.perf_counter()
        results, result_b, sessions, sessions_b = one_round(r, args, proxies)
        wall = time.perf_counter() - started
        settle(url, schemas)
        first_sessions += sessions[0]
        with on_server(url) as conn:
            rows = [client_rows(conn, a, s) for s in sessions]
            rows_b = client_rows(conn, b, sessions_b)
        for p, res, n in zip(proxies, results, rows, strict=True):
            killed = r == args.kill_round and p is proxies[-1]
            verdict = ("<= answered" if n <= res.answered else "MORE THAN ANSWERED") if killed \
                else ("== answered" if n == res.answered else "MISMATCH")  # fmt: skip
            print(f"round {r}, proxy {p.index}: answered {res.answered}, failed {res.failed}, "
                  f"client rows {n} ({verdict}{', killed' if killed else ''})")  # fmt: skip
        print(f"round {r}, project B via proxy 0: answered {result_b.answered}, rows {rows_b} "
              f"({'==' if rows_b == result_b.answered else 'MISMATCH'})")  # fmt: skip
        for s in schemas:
            found = integrity(url, root, s)
            print(f"round {r}, {s}: integrity {found or 'ok'}")
        wrong, own_a, own_b = leaks(emulator)
        print(f"round {r}: cross-project injections {wrong} (own: A {own_a}, B {own_b} requests)")
        print(f"round {r}: {shadow_line(url, a)}; wall {wall:.1f}s")
        total += sum(x.answered for x in results)  # project A's
        if r == args.kill_round:
            proxies[-1].start(upstream)
    return {"total": total, "sessions": first_sessions}


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
    return f"shadow runs {statuses}; proposals {valid} valid / {proposed}, {became} memories"


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
    before = len(emulator.requests)
    plan = LoadPlan(1, 1, CWD_A, "across", deadline_seconds=120)
    import ember.testing.load as load

    with _asks([str(ask).removeprefix("The user asked: ")], load):
        run_agents(proxies[1].url, plan)
    sent = " ".join(json.dumps(r.json()) for r in emulator.requests[before:])
    ids = sorted(set(re.findall(r"- \[([0-9a-f]{12})\]", sent)))
    with on_server(url) as conn:
        theirs = conn.execute(
            f"SELECT COUNT(*) FROM {schema}.memories WHERE id = ANY(%s) AND "
            "metadata::jsonb ->> 'source' = 'shadow' AND metadata::jsonb ->> 'session' = ANY(%s)",
            (ids, list(sessions)),
        ).fetchone()[0]
    return f"{'yes' if theirs else 'no'} ({theirs} of {len(ids)} injected memories were stored " \
        "by proxy 0's shadow from its own sessions)"  # fmt: skip


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
