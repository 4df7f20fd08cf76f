"""32 agents' streams: going direct, through the floor, and through ember — side by side.

Issue #20 asks for 32 concurrent streams at >= 0.8 of direct. Whether that is in reach of a
Python proxy on this machine is a measurement, not a guess: ``bench/passthrough.py`` is the
same serving and upstream libraries with none of ember's code. Legs, each its own process
beside the emulator (``ember dev upstream``), driven by 32 sessions of their own (a 24 KiB
Claude-Code-like conversation each, streamed), in interleaved rounds that each start once the
machine is quiet:

* direct: the emulator itself;
* floor: the pass-through;
* bare: ``ember proxy`` with accounting only (shaping, memory, shadow and TOIN off);
* full: ``ember proxy`` as shipped;
* with ``--baseline CHECKOUT``, bare and full of another checkout as well.

Per leg: completed streams per second (median of the rounds), its share of direct, and the
leg's process CPU per request. Loopback only; every round is bounded by its request count.

    python bench/stream_floor.py [--requests 1500] [--rounds 3] [--baseline CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import proxy_overhead as po
from common import BARE, EMBER, cpu_seconds, process, proxy_cmd, quiet, wait_healthy
from ember.server import free_port

HERE = Path(__file__).resolve().parent
#: The warm-up requests ``po.drive`` sends before it times a round (counted in the CPU).
WARM = 20


@dataclass
class Leg:
    name: str
    url: str
    pid: int | None  # None: direct (the emulator's CPU is not the proxy's)
    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


def legs_to_start(
    args: argparse.Namespace, env: dict[str, str]
) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, argv, env) of every leg but direct; an empty argv is ``ember proxy``."""
    out = [("floor", [sys.executable, str(HERE / "passthrough.py")], env)]
    trees = [("", None)] + ([(" (baseline)", args.baseline)] if args.baseline else [])
    for kind, extra in (("bare", BARE), ("full", {})):
        for suffix, tree in trees:
            leg_env = {**env, "EMBER_HOME": tempfile.mkdtemp(prefix="ember-floor-"), **extra}
            if tree:
                leg_env["PYTHONPATH"] = str(Path(tree).resolve() / "src")
            out.append((kind + suffix, [], leg_env))
    return out


async def run(args: argparse.Namespace) -> list[Leg]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    up_port = free_port()
    up = f"http://127.0.0.1:{up_port}"
    bodies = [po.body(24, True, f"agent{i}") for i in range(32)]
    with contextlib.ExitStack() as stack:
        emulator = stack.enter_context(
            process([EMBER, "dev", "upstream", "--port", str(up_port)], env)
        )
        legs, pids = [Leg("direct", up, None)], [emulator.pid]
        for name, argv, leg_env in legs_to_start(args, env):
            port = free_port()
            cmd = [*argv, str(port), up] if argv else proxy_cmd(port, up)
            proc = stack.enter_context(process(cmd, leg_env))
            pids.append(proc.pid)
            legs.append(Leg(name, f"http://127.0.0.1:{port}", proc.pid))
        for leg in legs:
            await wait_healthy(leg.url)
        for r in range(args.rounds):
            await one_round(legs, bodies, args, pids, r)
    return legs


async def one_round(
    legs: list[Leg], bodies: list[bytes], args: argparse.Namespace, pids: list[int], r: int
) -> None:
    """Every leg once, starting at a different leg each round (a proxy's leftover work must
    not always fall on the same neighbour)."""
    order = legs[r % len(legs) :] + legs[: r % len(legs)]
    for leg in order:
        await quiet(pids)
        before = cpu_seconds(leg.pid) if leg.pid else 0.0
        result = await po.drive(leg.url, po.one_stream, bodies, args.requests, 32)
        leg.rates.append(result.rate)
        if leg.pid:
            used = cpu_seconds(leg.pid) - before
            leg.cpu_ms.append(used / (args.requests + WARM) * 1000)
        print(f"round {r + 1}: {leg.name:16s} {result.rate:7.0f} streams/s", flush=True)


def print_table(legs: list[Leg], args: argparse.Namespace) -> None:
    direct = statistics.median(legs[0].rates)
    print(
        f"\n32 sessions' streams, {args.requests} per round, {args.rounds} rounds "
        f"(medians), 24 KiB bodies, loopback, {os.cpu_count()} cores\n"
    )
    print(f"{'leg':18s} {'streams/s':>10s} {'of direct':>10s} {'CPU/request':>12s}  rounds")
    for leg in legs:
        rate = statistics.median(leg.rates)
        cpu = f"{statistics.median(leg.cpu_ms):.2f} ms" if leg.cpu_ms else "-"
        each = " ".join(f"{x / statistics.median(legs[0].rates):.2f}" for x in leg.rates)
        print(f"{leg.name:18s} {rate:10.0f} {rate / direct:10.2f} {cpu:>12s}  {each}")
    print("\nof direct: the leg's median rate over direct's median (target for ember: >= 0.8)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1500, help="streams per leg per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", metavar="CHECKOUT", help="also run another checkout's ember")
    args = ap.parse_args()
    if args.requests < 1 or args.rounds < 1:
        ap.error("--requests and --rounds must be at least 1")
    print_table(asyncio.run(run(args)), args)


if __name__ == "__main__":
    main()
