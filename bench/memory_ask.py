"""What one new ask that retrieves costs: memory on vs memory off and direct, as processes.

A project holds ``--facts`` short memories (real vectors of the shipped model). The provider
emulator (``ember dev upstream``), a proxy with memory off and a proxy as shipped each run as
their own process; this process sends ``--asks`` requests to each, one at a time and
interleaved ask by ask (direct, off, on, the order rotating), so drift of a shared 2-core host
lands on all three alike. Every request is a new ask of a new conversation (a question from
``memory_data.search_queries``, numbered so that no text repeats), so the shipped proxy embeds
it and searches the project:
the case issue #20 bounds at +5 ms p50 / +10 ms p99. Printed: latency p50 / p99 per target, the
added cost over memory off and over direct (difference of percentiles and the median of the
per-ask pairs), each proxy's CPU time per request (from /proc), and how many asks had memories
injected and how many went without (the proxy's ledger).

    python bench/memory_ask.py [--facts 1000] [--asks 300] [--gap 0.05] [--baseline CHECKOUT]
                               [--postgres]

``--baseline`` adds a fourth target, memory on as another checkout of ember has it (its
``src`` first on the proxy's PYTHONPATH; e.g. ``git worktree add /tmp/before <commit>``), in
the same interleaved run: a before/after comparison on the same host state.

``--postgres`` adds memory on with everything on PostgreSQL (``store_url``; a server the test
setup starts, ``ember.testing.postgres``, or ``$EMBER_TEST_PG_URL``'s), the same memories in
the project's schema: issue #24's proxy latency of both backends side by side.

Loopback only; every loop is bounded by ``--asks``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

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
from ember.server import free_port
from memory_data import search_queries

CWD = "/home/bench/ask-project"
SYSTEM = "You are a coding agent. Answer briefly."
TARGETS = ("direct", "memory off", "memory on")
#: ``--baseline``: memory on as another checkout of ember has it (its ``src`` on PYTHONPATH)
BASELINE = "baseline on"
#: ``--postgres``: memory on, everything on PostgreSQL
ON_PG = "memory on (postgres)"


def body(ask: str) -> bytes:
    return orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "system": SYSTEM,
            "messages": [{"role": "user", "content": ask}],
        }
    )


async def one(s: aiohttp.ClientSession, url: str, data: bytes) -> float:
    headers = {"content-type": "application/json", "x-api-key": "sk-bench-not-real",
               "anthropic-version": "2023-06-01", "x-ember-cwd": CWD}  # fmt: skip
    t = time.perf_counter()
    async with s.post(url + "/v1/messages", data=data, headers=headers) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{url} answered {r.status}")
    return time.perf_counter() - t


def pct(xs: list[float], p: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


async def measure(urls: dict[str, str], asks: list[str], pids: dict[str, int], gap: float) -> dict:
    targets = list(urls)
    times: dict[str, list[float]] = {t: [] for t in targets}
    async with aiohttp.ClientSession() as s:
        for i, ask in enumerate(asks[:30]):  # warm-up: connections, the model's first load
            for t in targets:
                await one(s, urls[t], body(f"warm-up {i}: {ask}"))
        await asyncio.sleep(2.0)
        cpu = {t: cpu_seconds(p) for t, p in pids.items()}
        for i, ask in enumerate(asks[30:]):
            k = i % len(targets)
            order = targets[k:] + targets[:k]
            for t in order:
                times[t].append(await one(s, urls[t], body(ask)))
            await asyncio.sleep(gap)  # one agent's asks come seconds apart, not back to back
        cpu = {t: cpu_seconds(p) - cpu[t] for t, p in pids.items()}
    return {"times": times, "cpu": cpu}


def report(res: dict, args: argparse.Namespace, ledger: AskCounts) -> None:
    times, cpu = res["times"], res["cpu"]
    targets = list(times)
    n = len(times["direct"])
    print(f"\none new ask per request, {n} asks per target, {args.facts} memories in the project, "
          f"separate processes, loopback, {os.cpu_count()} cores\n")  # fmt: skip
    print(f"{'target':22} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms/req':>11}")
    for t in targets:
        c = f"{cpu[t] / n * 1000:11.2f}" if t in cpu else f"{'-':>11}"
        print(f"{t:22} {pct(times[t], 50):8.2f} {pct(times[t], 99):8.2f} {c}")
    print()
    pairs_of = [("memory on", "memory off"), ("memory on", "direct"), ("memory off", "direct")]
    if BASELINE in times:
        pairs_of += [(BASELINE, "memory off"), ("memory on", BASELINE)]
    if ON_PG in times:
        pairs_of += [(ON_PG, "memory off"), (ON_PG, "memory on")]
    for a, b in pairs_of:
        pairs = [x - y for x, y in zip(times[a], times[b], strict=True)]
        print(f"{a} - {b}: added p50 {pct(times[a], 50) - pct(times[b], 50):+.2f} ms, "
              f"p99 {pct(times[a], 99) - pct(times[b], 99):+.2f} ms; paired median "
              f"{statistics.median(pairs) * 1000:+.2f} ms")  # fmt: skip
    print(f"\n{ledger.sentence()}  (the memory-on proxy's ledger)")
    print("targets (issue #20): one new retrieving ask adds <= 5 ms p50, <= 10 ms p99")


async def main_async(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="ember-ask-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
        homes = {"memory off": base / "memory-off", "memory on": base / "memory-on"}
        homes["memory off"].mkdir()
        db = seed_project(homes["memory on"], CWD, args.facts)
        envs = {
            "memory off": {**env, "EMBER_HOME": str(homes["memory off"]),
                           "EMBER_MEMORY_MODE": "off"},
            "memory on": {**env, "EMBER_HOME": str(homes["memory on"])},
        }  # fmt: skip
        if args.baseline:
            homes[BASELINE] = base / "baseline-on"
            src = str(Path(args.baseline).resolve() / "src")
            envs[BASELINE] = {**env, "EMBER_HOME": str(homes[BASELINE]), "PYTHONPATH": src}
            # Seeded by the baseline's own code, so its file is what that version writes.
            seed_with(envs[BASELINE], homes[BASELINE], CWD, args.facts)
        with contextlib.ExitStack() as stack:
            if args.postgres:
                from ember.testing.postgres import postgres_server

                url = stack.enter_context(stack.enter_context(postgres_server()).fresh_database())
                homes[ON_PG] = base / "memory-on-postgres"
                seed_project(homes[ON_PG], CWD, args.facts, store_url=url)
                envs[ON_PG] = {**env, "EMBER_HOME": str(homes[ON_PG]), "EMBER_STORE_URL": url}
            ports = {t: free_port() for t in ["direct", *envs]}
            up = f"http://127.0.0.1:{ports['direct']}"
            urls = {t: f"http://127.0.0.1:{p}" for t, p in ports.items()}
            stack.enter_context(
                process([EMBER, "dev", "upstream", "--port", str(ports["direct"])], env)
            )
            pids = {t: stack.enter_context(process(proxy_cmd(ports[t], up), e)).pid
                    for t, e in envs.items()}  # fmt: skip
            for url in urls.values():
                await wait_healthy(url)
            # Numbered: the generator repeats its questions, and a repeated text would be a
            # replayed ask (the ledger) or a reused query vector, not a new ask.
            asks = [f"{q} (ticket {i})" for i, q in enumerate(search_queries(args.asks + 30))]
            res = await measure(urls, asks, pids, args.gap)
        report(res, args, ledger_counts(db))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--facts", type=int, default=1000)
    ap.add_argument("--asks", type=int, default=300)
    ap.add_argument(
        "--gap",
        type=float,
        default=0.05,
        help="seconds between rounds (default 0.05): back-to-back asks would meet "
        "memory_cpu_share, and an ask turned away measures nothing",
    )
    ap.add_argument(
        "--postgres", action="store_true", help="also run memory on with store_url (PostgreSQL)"
    )
    ap.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also run memory on as another checkout has it (e.g. a git worktree)",
    )
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
