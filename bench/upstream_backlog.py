"""A provider that drops connections: 200 concurrent streams against a listen backlog of 5.

The provider emulator runs as its own process with a tiny listen backlog; ``ember proxy`` runs
in front of it once per value of ``upstream_max_opening`` (0 = connections opened without
limit, the behaviour before issue #7). The same burst of concurrent streaming requests is sent
straight to the emulator ("direct") and through each proxy. For each: p50 / p99 / max time to
the complete stream, how many went unanswered (not 200, cut, or over the client's timeout),
and the kernel's listen-overflow count during the run (Linux, from /proc/net/netstat; the
counter is per network namespace, so other traffic on the machine can add to it).

Every loop is bounded: ``--runs`` bursts of ``--streams`` requests, each request bounded by
``--timeout`` seconds. Nothing leaves loopback.

    python bench/upstream_backlog.py [--streams 200] [--backlog 5] [--runs 3] [--openings 0,8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from common import EMBER, process, wait_healthy
from ember.server import free_port

BODY = json.dumps(
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
).encode()
HEADERS = {
    "content-type": "application/json",
    "x-api-key": "bench",
    "anthropic-version": "2023-06-01",
}
NETSTAT = Path("/proc/net/netstat")


def listen_overflows() -> int | None:
    """The kernel's ListenOverflows counter (connections dropped on a full accept queue)."""
    if not NETSTAT.exists():
        return None
    lines = NETSTAT.read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        row = dict(zip(names.split()[1:], values.split()[1:], strict=False))
        if "ListenOverflows" in row:
            return int(row["ListenOverflows"])
    return None


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    unanswered: int = 0
    overflows: int | None = 0

    def add(self, other: Result) -> None:
        self.latencies += other.latencies
        self.unanswered += other.unanswered
        if self.overflows is None or other.overflows is None:
            self.overflows = None
        else:
            self.overflows += other.overflows

    def pct(self, p: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def one(session: aiohttp.ClientSession, url: str) -> tuple[float, bool]:
    started = time.perf_counter()
    try:
        async with session.post(url + "/v1/messages", data=BODY, headers=HEADERS) as r:
            data = await r.read()
            ok = r.status == 200 and b"message_stop" in data
    except (aiohttp.ClientError, TimeoutError):
        ok = False
    return time.perf_counter() - started, ok


async def burst(url: str, streams: int, timeout: float) -> Result:
    """``streams`` concurrent streaming requests on fresh connections, all sent at once."""
    before = listen_overflows()
    connector = aiohttp.TCPConnector(limit=0)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=client_timeout) as session:
        done = await asyncio.gather(*(one(session, url) for _ in range(streams)))
    after = listen_overflows()
    overflows = after - before if after is not None and before is not None else None
    return Result([t for t, _ in done], sum(not ok for _, ok in done), overflows)


def emulator_cmd(port: int, backlog: int) -> list[str]:
    code = (
        "from ember.server import serve_forever; from ember.testing import Emulator; "
        f"serve_forever(Emulator(), '127.0.0.1', {port}, 'warning', backlog={backlog})"
    )
    return [sys.executable, "-c", code]


async def measure(url: str, args: argparse.Namespace) -> Result:
    total = Result()
    for _ in range(args.runs):
        total.add(await burst(url, args.streams, args.timeout))
        await asyncio.sleep(1.0)  # let the emulator's last streams and sockets wind down
    return total


async def main_async(args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env.update(
        EMBER_HOME=tempfile.mkdtemp(prefix="ember-bench-"),
        EMBER_LOG_LEVEL="error",
        EMBER_OUTPUT_SHAPING="false",
        EMBER_MEMORY_MODE="off",
        EMBER_UPSTREAM_CONNECT_TIMEOUT=str(args.connect_timeout),
    )
    up_port = free_port()
    up = f"http://127.0.0.1:{up_port}"
    results: dict[str, Result] = {}
    with process(emulator_cmd(up_port, args.backlog), env):
        await wait_healthy(up)
        results["direct"] = await measure(up, args)
        for opening in args.openings:
            port = free_port()
            proxy_env = {**env, "EMBER_PORT": str(port), "EMBER_ANTHROPIC_URL": up}
            proxy_env["EMBER_UPSTREAM_MAX_OPENING"] = str(opening)
            with process([EMBER, "proxy"], proxy_env):
                url = f"http://127.0.0.1:{port}"
                await wait_healthy(url)
                results[f"proxy, max_opening={opening}"] = await measure(url, args)
    print_table(results, args)


def print_table(results: dict[str, Result], args: argparse.Namespace) -> None:
    print(
        f"\n{args.streams} concurrent streams x {args.runs} runs, emulator listen backlog "
        f"{args.backlog}, proxy connect timeout {args.connect_timeout:g} s, "
        f"client timeout {args.timeout:g} s\n"
    )
    head = f"{'target':<26}{'p50 s':>8}{'p99 s':>8}{'max s':>8}{'unanswered':>12}{'overflows':>11}"
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        overflows = "n/a" if r.overflows is None else str(r.overflows)
        total = args.streams * args.runs
        print(
            f"{name:<26}{r.pct(50):>8.2f}{r.pct(99):>8.2f}{max(r.latencies):>8.2f}"
            f"{f'{r.unanswered}/{total}':>12}{overflows:>11}"
        )
    proxies = [n for n in results if n != "direct"]
    direct = results["direct"]
    print("\nratios (p50 / p99 / max):")
    for name in proxies:
        print(f"  {name} vs direct: {ratios(results[name], direct)}")
    for name in proxies[1:]:
        print(f"  {proxies[0]} vs {name}: {ratios(results[proxies[0]], results[name])}")


def ratios(a: Result, b: Result) -> str:
    pairs = ((a.pct(50), b.pct(50)), (a.pct(99), b.pct(99)), (max(a.latencies), max(b.latencies)))
    return " / ".join(f"{x / y:.1f}x" for x, y in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--backlog", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="client timeout per stream")
    parser.add_argument("--connect-timeout", type=float, default=10.0)
    parser.add_argument(
        "--openings",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[0, 8],
        help="values of upstream_max_opening to compare (0 = no limit)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
