"""What each feature adds to one client's latency: the shipped proxy, and the same with one
feature switched off at a time, side by side in interleaved rounds.

Every proxy is its own ``ember proxy`` process (its own home) in front of one emulator
(``ember dev upstream``); one client sends the same Claude-Code-like JSON request (24 KiB)
to each in turn, round after round (each round starting at another column), so drift on the
machine hits every column alike. The first round after start-up is printed apart: every
proxy is slower in it than later. All the proxies start together, so a column measured later
in that round has been up longer: compare first-round columns with that in mind.

    python bench/feature_ablation.py [--requests 400] [--rounds 4]

Every loop is bounded; nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EMBER, process, proxy_cmd, wait_healthy
from ember.server import free_port
from proxy_overhead import Run, body, drive, one_json

#: Each column: the shipped defaults with these variables set.
CASES: dict[str, dict[str, str]] = {
    "shipped": {},
    "shadow off": {"EMBER_SHADOW": "off"},
    "traffic off": {"EMBER_TRAFFIC_LEARNING": "false"},
    "shaping off": {"EMBER_OUTPUT_SHAPING": "false"},
    "toin off": {"EMBER_TOIN": "false"},
    "memory off": {"EMBER_MEMORY_MODE": "off"},
    "compress off": {"EMBER_COMPRESS": "off"},
    "accounting off": {"EMBER_ACCOUNTING": "false"},
}


async def measure(args: argparse.Namespace) -> tuple[list[Run], dict[str, list[Run]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    up_port = free_port()
    up = f"http://127.0.0.1:{up_port}"
    ports = {name: free_port() for name in CASES}
    with ExitStack() as stack:
        stack.enter_context(process([EMBER, "dev", "upstream", "--port", str(up_port)], env))
        for name, extra in CASES.items():
            home = tempfile.mkdtemp(prefix="ember-ablation-")
            stack.enter_context(
                process(proxy_cmd(ports[name], up), {**env, "EMBER_HOME": home, **extra})
            )
        await wait_healthy(up)
        for port in ports.values():
            await wait_healthy(f"http://127.0.0.1:{port}")
        data = body(24, False)
        direct: list[Run] = []
        runs: dict[str, list[Run]] = {name: [] for name in CASES}
        names = list(CASES)
        for r in range(args.rounds):
            direct.append(await drive(up, one_json, data, args.requests, 1))
            # Each round starts at another column, so no column is always measured first.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                url = f"http://127.0.0.1:{ports[name]}"
                runs[name].append(await drive(url, one_json, data, args.requests, 1))
    return direct, runs


def report(direct: list[Run], runs: dict[str, list[Run]]) -> None:
    steady = range(1, len(direct))
    d50 = statistics.median(direct[i].pct(50) for i in steady)
    d99 = statistics.median(direct[i].pct(99) for i in steady)
    print(f"direct: p50 {d50:.2f} ms, p99 {d99:.2f} ms (median over rounds 2..{len(direct)})")
    print(f"\n{'proxy':<16}{'first round':>22}{'later rounds (median)':>26}{'vs shipped p99':>16}")
    print(f"{'':<16}{'added p50':>11}{'added p99':>11}{'added p50':>13}{'added p99':>13}")
    base99 = statistics.median(runs["shipped"][i].pct(99) for i in steady) - d99
    for name, rs in runs.items():
        p50 = statistics.median(rs[i].pct(50) for i in steady) - d50
        p99 = statistics.median(rs[i].pct(99) for i in steady) - d99
        f50 = rs[0].pct(50) - direct[0].pct(50)
        f99 = rs[0].pct(99) - direct[0].pct(99)
        delta = "" if name == "shipped" else f"{p99 - base99:+.2f} ms"
        print(f"{name:<16}{f50:>9.2f}ms{f99:>9.2f}ms{p50:>11.2f}ms{p99:>11.2f}ms{delta:>16}")
    print(
        "\nadded = proxy - direct at the same percentile (targets, issue #20: p50 <= 1, p99 <= 3)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per cell")
    parser.add_argument("--rounds", type=int, default=4, help="rounds (the first is apart)")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2: the first round is reported apart")
    direct, runs = asyncio.run(measure(args))
    report(direct, runs)


if __name__ == "__main__":
    main()
