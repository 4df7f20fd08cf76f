"""Spend limits across proxies sharing one store (issue #37): does a limit hold?

Three ``ember proxy`` processes share one store (one PostgreSQL, each with a home of its own
as on three machines; or one SQLite home), with ``budget_daily_usd = 0.05`` and
``budget_refuse`` on, in front of one provider emulator that answers after ``--latency``
seconds (so many requests are in flight at once). Each proxy serves ``--agents`` agents
(the official anthropic SDK, one project) asking at once, each until it is refused for good:
a refusal while requests in flight hold the rest of the limit (no retry date) is asked again
a moment later; one with a retry date (the limit is spent) ends the agent.

Then, from the store: what was spent against the limit, and by how much it was passed next
to the dearest single request (the promise: at most one request's cost).

The kill leg does the same, answers taking ``--kill-latency`` seconds, and ``--kill-after``
seconds into the burst the proxy holding the most reservations is killed with SIGKILL: what
it held is left in the store unrenewed, and the leg says how long until it no longer counts
(``budget.flights.TTL_SECONDS``, 60 s); the other proxies' agents are refused meanwhile, then
go on until the limit is spent. What the provider answered for the killed proxy was never
recorded: no limit can count it.

The latency leg: one client asking ``--requests`` times, one request at a time, through a
proxy without a limit and one with a limit (never reached), alternately; the p50 of each
and their difference is what a reservation adds per request.

    python bench/budget_soak.py [--store both|sqlite|postgres] [--agents 8] [--latency 0.3]

``bench/pg_soak.py`` runs the PostgreSQL legs after its own rounds (``run_legs``).
Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

sys.path.insert(0, str(Path(__file__).parent))
from common import BARE, ProxyProcess
from ember.budget import held, policy
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.registry import Storage
from ember.testing import Emulator

CWD = "/home/team/gamma-budget"
LIMIT = 0.05
PROXIES = 3


def make_proxies(
    root: Path, store_url: str | None, budget: dict[str, str], n: int
) -> list[ProxyProcess]:
    """``n`` proxies: each its own home on PostgreSQL (three machines), one home on SQLite."""
    out = []
    for i in range(n):
        home = root / (f"machine{i}" if store_url else "home")
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
        env |= BARE | budget | {"EMBER_HOME": str(home)}
        if store_url:
            env["EMBER_STORE_URL"] = store_url
        out.append(ProxyProcess(home, env, f"proxy-{len(out)}.log"))
    return out


def project_of(root: Path) -> str:
    """Each leg's own project (legs share a PostgreSQL database): named by its folder."""
    return f"{CWD}-{root.name}"


def limited(limit: float) -> dict[str, str]:
    return {"EMBER_BUDGET_DAILY_USD": str(limit), "EMBER_BUDGET_REFUSE": "true"}


def ask(client: anthropic.Anthropic, cwd: str) -> None:
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Working directory: {cwd}",
        messages=[{"role": "user", "content": "Which database does this project use?"}],
    )


@dataclass
class Counts:
    answered: int = 0
    held_refusals: int = 0  # refused while requests in flight held the rest
    spent_refusals: int = 0  # refused with the limit spent (ends the agent)
    broken: int = 0  # the proxy went away (the kill leg)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


def burst(urls: list[str], cwd: str, agents: int, counts: Counts, deadline: float = 120.0) -> None:
    """Each agent a session named by its proxy (``p<i>-...``): the kill leg tells by it whose
    reservations are whose."""

    def agent(i: int, j: int) -> None:
        end = time.monotonic() + deadline
        session = {"x-ember-session-id": f"p{i}-agent{j}"}
        with anthropic.Anthropic(
            base_url=urls[i], api_key="k", max_retries=0, timeout=30, default_headers=session
        ) as c:
            while time.monotonic() < end:
                try:
                    ask(c, cwd)
                    counts.add("answered")
                except anthropic.RateLimitError as err:
                    if "retry-after" in err.response.headers:
                        counts.add("spent_refusals")
                        return
                    counts.add("held_refusals")
                    time.sleep(0.05)
                except anthropic.APIError:
                    counts.add("broken")
                    return

    threads = [
        threading.Thread(target=agent, args=(i, j)) for i in range(len(urls)) for j in range(agents)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(deadline + 60)


def project_store(root: Path, store_url: str | None) -> tuple[Storage, Path]:
    """The store of the leg at ``root``, and its project's path (``project_of``)."""
    home = root / ("machine0" if store_url else "home")
    ref = resolve_project({}, None, f"Working directory: {project_of(root)}")
    assert ref is not None
    return Storage(home, store_url=store_url, vec=False), ref.db_path(home)


def spend_of(root: Path, store_url: str | None) -> tuple[float, float, int, policy.Spend]:
    """(spent, dearest request, client rows, standing now) of the project, from the store."""
    storage, path = project_store(root, store_url)
    sql = "SELECT COALESCE(SUM(cost_usd), 0), COALESCE(MAX(cost_usd), 0), COUNT(*) FROM " \
        "exchanges WHERE origin = 'client' AND outcome = 'ok'"  # fmt: skip
    try:
        db = storage.database(path)
        spent, dearest, n = db.read(lambda c: tuple(c.execute(sql).fetchone()))
        now = time.time()
        standing = db.read(lambda c: held.standing(c, now))
    finally:
        storage.close()
    return float(spent), float(dearest), int(n), standing


def settle(root: Path, store_url: str | None, timeout: float = 30.0) -> None:
    """Until no client row moves for 2 s (the proxies write after answering)."""
    last, still, end = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < end:
        now = spend_of(root, store_url)[2]
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= 2.0:
            return
        time.sleep(0.5)


def burst_leg(label: str, root: Path, store_url: str | None, args: argparse.Namespace,
              kill: bool) -> None:  # fmt: skip
    emulator = Emulator(latency=args.kill_latency if kill else args.latency)
    watch: list[str] = []
    with BackgroundServer(emulator) as upstream:
        proxies = make_proxies(root, store_url, limited(LIMIT), PROXIES)
        try:
            for p in proxies:
                p.start(upstream.url)
            counts = Counts()
            watcher = threading.Thread(target=kill_and_watch, args=(
                proxies, root, store_url, args.kill_after, watch))  # fmt: skip
            if kill:
                watcher.start()
            started = time.perf_counter()
            burst([p.url for p in proxies], project_of(root), args.agents, counts)
            wall = time.perf_counter() - started
            if kill:
                watcher.join(180)
            settle(root, store_url)
        finally:
            for p in proxies:
                p.stop()
        forwarded = len(emulator.requests)
    spent, dearest, rows, _ = spend_of(root, store_url)
    over = spent - LIMIT
    verdict = "within one request" if over <= dearest + 1e-9 else "MORE THAN ONE REQUEST"
    c = counts
    print(f"{label:28} {c.answered:8d} {c.held_refusals:6d} {c.spent_refusals:6d} {c.broken:6d} "
          f"{spent:9.4f} {over:+9.4f} {dearest:8.4f} {wall:6.1f}s  {verdict}")  # fmt: skip
    if kill:
        print(f"{'':28} forwarded {forwarded}, rows {rows}: {forwarded - rows} forwarded by the "
              "killed proxy and never recorded")  # fmt: skip
        for line in watch:
            print(f"{'':28} {line}")


#: Reservations that still count now (parameter: now): id, session.
_LIVE_IDS = (
    "SELECT r.id, r.session_id FROM budget_reservations r WHERE r.expires_at > ? AND NOT EXISTS "
    "(SELECT 1 FROM exchanges e WHERE e.session_id = r.session_id AND e.ts = r.ts)"
)


def live_ids(root: Path, store_url: str | None) -> dict[str, str]:
    storage, path = project_store(root, store_url)
    try:
        now = time.time()
        rows = storage.database(path).read(lambda c: c.execute(_LIVE_IDS, (now,)).fetchall())
    finally:
        storage.close()
    return {r[0]: r[1] for r in rows}


def kill_and_watch(proxies: list[ProxyProcess], root: Path, store_url: str | None, after: float,
                   out: list[str]) -> None:  # fmt: skip
    """Kill, ``after`` seconds into the burst, the proxy holding the most reservations; how
    long what it held still counts (renewed by nobody: until it expires)."""
    time.sleep(after)
    held_by = [0] * len(proxies)
    for _ in range(100):  # a moment when some proxy holds reservations
        live = live_ids(root, store_url)
        held_by = [sum(s.startswith(f"p{i}-") for s in live.values()) for i in range(len(proxies))]
        if max(held_by):
            break
        time.sleep(0.05)
    victim = held_by.index(max(held_by))
    proxies[victim].kill()
    killed = time.monotonic()
    left = {r for r, s in live_ids(root, store_url).items() if s.startswith(f"p{victim}-")}
    at_kill, last = len(left), 0.0
    while left and time.monotonic() - killed < 150:
        time.sleep(0.5)
        still = set(live_ids(root, store_url)) & left
        if len(still) < len(left):
            last = time.monotonic() - killed
        left = still
    still = " (some still count)" if left else ""
    out.append(f"proxy {victim} killed holding {at_kill} reservations; the last stopped "
               f"counting {last:.1f}s after the kill{still}")  # fmt: skip


def latency_leg(label: str, root: Path, store_url: str | None, requests: int) -> None:
    """p50 of one request at a time without a limit and with one (never reached)."""
    emulator = Emulator()
    with BackgroundServer(emulator) as upstream:
        [free] = make_proxies(root / "free", store_url, {}, 1)
        [capped] = make_proxies(root / "capped", store_url, limited(1000.0), 1)
        times: dict[str, list[float]] = {"free": [], "capped": []}
        try:
            free.start(upstream.url)
            capped.start(upstream.url)
            a = anthropic.Anthropic(base_url=free.url, api_key="k", max_retries=0)
            b = anthropic.Anthropic(base_url=capped.url, api_key="k", max_retries=0)
            with a, b:
                for c in (a, b):  # warm up: the project's store, connections
                    for _ in range(10):
                        ask(c, project_of(root))
                for _ in range(requests):
                    for name, c in (("free", a), ("capped", b)):
                        t = time.perf_counter()
                        ask(c, project_of(root))
                        times[name].append(time.perf_counter() - t)
        finally:
            free.stop()
            capped.stop()
    p50 = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(f"{label:28} p50 without a limit {p50['free']:.2f} ms, with one {p50['capped']:.2f} ms:"
          f" {p50['capped'] - p50['free']:+.2f} ms per request ({requests} each)")  # fmt: skip


def run_legs(label: str, store_url: str | None, root: Path, args: Any) -> None:
    """The burst, the kill and the latency legs on one store."""
    print(f"\nbudget across {PROXIES} proxies, {label}: daily limit ${LIMIT}, refuse on, "
          f"{args.agents} agents per proxy, answers after {args.latency}s")  # fmt: skip
    print(f"{'leg':28} {'answered':>8} {'held':>6} {'spent':>6} {'broken':>6} "
          f"{'spent $':>9} {'past it':>9} {'dearest':>8} {'wall':>7}")  # fmt: skip
    burst_leg(f"{label}: burst", root / "burst", store_url, args, kill=False)
    burst_leg(f"{label}: one killed", root / "kill", store_url, args, kill=True)
    latency_leg(f"{label}: latency", root / "latency", store_url, args.requests)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", choices=("both", "sqlite", "postgres"), default="both")
    ap.add_argument("--agents", type=int, default=8, help="agents per proxy")
    ap.add_argument("--latency", type=float, default=0.3, help="the emulator's answer delay")
    ap.add_argument("--kill-after", type=float, default=1.0)
    ap.add_argument("--kill-latency", type=float, default=2.0, help="the kill leg's delay")
    ap.add_argument("--requests", type=int, default=200, help="per proxy, latency leg")
    return ap.parse_args(argv)


def main() -> None:
    args = options()
    root = Path(tempfile.mkdtemp(prefix="ember-budget-soak-"))
    if args.store in ("both", "sqlite"):
        run_legs("sqlite", None, root / "sqlite", args)
    if args.store in ("both", "postgres"):
        from ember.testing.postgres import postgres_server

        with postgres_server() as pg, pg.fresh_database() as url:
            run_legs("postgres", url, root / "postgres", args)


if __name__ == "__main__":
    main()
