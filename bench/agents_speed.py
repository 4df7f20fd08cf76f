"""Several agents at once: throughput through ember as shipped, with memory off, and direct.

The provider emulator (``ember dev upstream``) and each proxy run as their own process; this
process runs the load (``bench/support/load.py``: N agents x M turns, Anthropic and OpenAI SDKs,
JSON and streaming, every turn a new ask of one project whose memory holds ``--facts`` facts).
Each round runs the load straight at the emulator, then through each proxy (the order rotating
by round). Printed: requests per second and latency per leg, each leg's throughput as a share of
the direct one in its round, each proxy's CPU time per request (from /proc), how many asks got
memories and how many went on without because every search slot was busy (the proxy's ledger,
as ``ember stats`` reads it), and the kernel's listen-queue overflows during the run
(``TcpExtListenOverflows``: a non-zero count means the emulator or a proxy dropped connections
and the numbers are not comparable).

    python bench/agents_speed.py [--agents 8] [--turns 25] [--rounds 3] [--facts 1000]
                                 [--baseline CHECKOUT]

``--baseline`` adds a leg: ember as shipped by another checkout (its ``src`` first on the
proxy's PYTHONPATH, its project seeded by its own code), in the same rounds.

Loopback only; every loop is bounded by its turns and a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import (
    EMBER,
    cpu_seconds,
    ledger_counts,
    process,
    proxy_cmd,
    seed_project,
    seed_with,
    wait_healthy,
)
from ember.memory.ledger import AskCounts
from ember.project import resolve_project
from ember.server import free_port
from support.load import LoadPlan, LoadResult, run_agents

CWD = "/home/bench/agents-project"
PROXIES = {"ember": {}, "memory off": {"EMBER_MEMORY_MODE": "off"}}
BASELINE = "baseline"


def listen_overflows() -> int:
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if head.startswith("TcpExt:"):
            table = dict(zip(head.split()[1:], values.split()[1:], strict=True))
            return int(table.get("ListenOverflows", 0))
    return 0


def asks(home: Path) -> AskCounts:
    """What the proxy's ledger says of the project's new asks (as ``ember stats`` does)."""
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ledger_counts(ref.db_path(home))


def run_leg(url: str, args: argparse.Namespace, tag: str) -> tuple[LoadResult, float]:
    plan = LoadPlan(args.agents, args.turns, CWD, tag, deadline_seconds=600)
    started = time.perf_counter()
    result = run_agents(url, plan)
    return result, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--facts", type=int, default=1000)
    ap.add_argument("--baseline", metavar="CHECKOUT", help="also run another checkout's ember")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ember-agents-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    proxies = {name: {**env, **extra} for name, extra in PROXIES.items()}
    if args.baseline:
        proxies[BASELINE] = {**env, "PYTHONPATH": str(Path(args.baseline).resolve() / "src")}
    try:
        homes = {name: base / name.replace(" ", "-") for name in proxies}
        for name, home in homes.items():
            home.mkdir()
            proxies[name]["EMBER_HOME"] = str(home)
        seed_project(homes["ember"], CWD, args.facts)
        if BASELINE in homes:  # seeded by the baseline's own code
            seed_with(proxies[BASELINE], homes[BASELINE], CWD, args.facts)
        rows, overflows = run_rounds(args, env, proxies)
        # The baseline's ledger may predate the column that marks busy asks: not counted.
        counts = {name: asks(homes[name]) for name in PROXIES if name != "memory off"}
        report(rows, args, overflows, counts)
    finally:
        shutil.rmtree(base, ignore_errors=True)


Row = tuple[int, str, LoadResult, float, "float | None"]


def run_rounds(
    args: argparse.Namespace, env: dict[str, str], proxies: dict[str, dict[str, str]]
) -> tuple[list[Row], int]:
    """Every round: the load direct, then through each proxy (the order rotating)."""
    rows: list[Row] = []
    ports = {name: free_port() for name in ["direct", *proxies]}
    up = f"http://127.0.0.1:{ports['direct']}"
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    with ExitStack() as stack:
        emulator = [EMBER, "dev", "upstream", "--port", str(ports["direct"])]
        stack.enter_context(process(emulator, env))
        pids = {}
        for name, penv in proxies.items():
            pids[name] = stack.enter_context(process(proxy_cmd(ports[name], up), penv)).pid
        for url in urls.values():
            asyncio.run(wait_healthy(url))
        for url in urls.values():  # SDK imports, connections, the model's first load
            run_agents(url, LoadPlan(args.agents, 3, CWD, "warm-up", deadline_seconds=120))
        time.sleep(2.0)
        overflows = listen_overflows()
        for r in range(args.rounds):
            order = list(proxies)
            order = order[r % len(order) :] + order[: r % len(order)]
            result, wall = run_leg(urls["direct"], args, f"direct{r}")
            rows.append((r, "direct", result, wall, None))
            for name in order:
                cpu = cpu_seconds(pids[name])
                result, wall = run_leg(urls[name], args, f"{name}{r}")
                rows.append((r, name, result, wall, cpu_seconds(pids[name]) - cpu))
        overflows = listen_overflows() - overflows
    return rows, overflows


def report(
    rows: list[Row],
    args: argparse.Namespace,
    overflows: int,
    counts: dict[str, AskCounts],
) -> None:
    print(f"\n{args.agents} agents x {args.turns} turns x {args.rounds} rounds, one project "
          f"({args.facts} memories for ember), emulator and proxies as processes, "
          f"{os.cpu_count()} cores\n")  # fmt: skip
    head = f"{'round':>5} {'leg':12} {'answered':>8} {'failed':>6} {'req/s':>8} "
    head += f"{'p50 ms':>8} {'p99 ms':>8} {'share':>6} {'cpu ms/req':>10}"
    print(head)
    print("-" * len(head))
    direct = {r: res.answered / wall for r, name, res, wall, _ in rows if name == "direct"}
    shares: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for r, name, res, wall, cpu in rows:
        rate = res.answered / wall
        lat = sorted(res.latencies) or [float("nan")]
        share = rate / direct[r]
        if name != "direct":
            shares.setdefault(name, []).append(share)
            cpus.setdefault(name, []).append((cpu or 0.0) / max(res.answered, 1) * 1000)
        c = f"{(cpu or 0.0) / max(res.answered, 1) * 1000:10.2f}" if cpu is not None else ""
        print(f"{r:5d} {name:12} {res.answered:8d} {res.failed:6d} {rate:8.1f} "
              f"{lat[len(lat) // 2] * 1000:8.1f} {lat[int(0.99 * (len(lat) - 1))] * 1000:8.1f} "
              f"{share:6.2f} {c:>10}")  # fmt: skip
    print()
    for name, values in shares.items():
        print(f"{name}: {statistics.median(values):.2f} of direct (median of rounds; "
              f"{' '.join(f'{v:.2f}' for v in values)}), proxy CPU "
              f"{statistics.median(cpus[name]):.2f} ms per request")  # fmt: skip
    for name, c in counts.items():
        print(f"{name}: {c.sentence()}")
    print(f"listen-queue overflows during the run: {overflows}")
    print("targets (issue #20): ember >= 0.8 of direct, proxy CPU <= 3 ms per request")


if __name__ == "__main__":
    main()
