"""What the proxy costs: added latency and throughput over going direct to the provider.

Runs the provider emulator (``ember dev upstream``) and the proxy (``ember proxy``) as separate
processes on loopback, then drives the same requests at both from this process with aiohttp:

* JSON: full request latency, p50 / p99;
* streaming: time to first event (TTFE), p50 / p99;
* 32 concurrent streaming clients: completed streams per second, first as 32 clients
  resending one conversation, then as 32 sessions of their own (an agent each: the load
  issue #20's "32 streams" means).

Then: ``ember proxy`` start-up time until ``/healthz`` answers 200, and its resident memory
when idle. Every loop is bounded by a request count; nothing leaves loopback.

    python bench/proxy_overhead.py [--requests 400] [--concurrency 32] [--body-kb 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from common import BARE, EMBER, process, proxy_cmd, quiet, wait_healthy
from ember.server import free_port


def body(body_kb: int, stream: bool, session: str = "bench") -> bytes:
    """A Claude-Code-like request of about ``body_kb`` KiB, of the conversation ``session``
    (its id in ``metadata.user_id``, and in its first message when it is not the default)."""
    history = []
    turn = 0
    own = "" if session == "bench" else f"[{session}] "
    while len(json.dumps(history)) < body_kb * 1024:
        history.append(
            {
                "role": "user",
                "content": [{"type": "text", "text": f"step {turn} {own}" + "x" * 400}],
            }
        )
        history.append({"role": "assistant", "content": [{"type": "text", "text": "ok " * 60}]})
        turn += 1
    history.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}],
        }
    )
    payload = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": stream,
        "system": [
            {
                "type": "text",
                "text": "You are a coding agent. " * 100
                + "\n<env>\nWorking directory: /home/bench/project\n</env>",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": history,
        "metadata": {"user_id": f"user_b_account_b_session_{session}"},
    }
    return json.dumps(payload).encode()


HEADERS = {
    "content-type": "application/json",
    "x-api-key": "bench",
    "anthropic-version": "2023-06-01",
}


async def one_json(s: aiohttp.ClientSession, url: str, data: bytes) -> float:
    t = time.perf_counter()
    async with s.post(url + "/v1/messages", data=data, headers=HEADERS) as r:
        await r.read()
        assert r.status == 200, r.status
    return time.perf_counter() - t


async def one_stream(s: aiohttp.ClientSession, url: str, data: bytes) -> float:
    """Time to the first SSE event; the rest of the stream is drained."""
    t = time.perf_counter()
    first = None
    async with s.post(url + "/v1/messages", data=data, headers=HEADERS) as r:
        assert r.status == 200, r.status
        async for _ in r.content.iter_any():
            if first is None:
                first = time.perf_counter() - t
    assert first is not None
    return first


@dataclass
class Run:
    samples: list[float]
    wall: float

    def pct(self, p: float) -> float:
        xs = sorted(self.samples)
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000

    @property
    def rate(self) -> float:
        return len(self.samples) / self.wall


async def drive(
    url: str,
    fn: Callable[[aiohttp.ClientSession, str, bytes], Awaitable[float]],
    data: bytes | list[bytes],
    n: int,
    concurrency: int,
) -> Run:
    """``n`` requests from ``concurrency`` clients; ``data`` one body for all, or one body
    per client (client ``i`` sends ``data[i % len(data)]``)."""
    bodies = data if isinstance(data, list) else [data]
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as s:
        for i in range(min(20, n)):  # warm connections and caches
            await fn(s, url, bodies[i % len(bodies)])
        queue = list(range(n))
        samples: list[float] = []

        async def worker(own: bytes) -> None:
            while queue:
                queue.pop()
                samples.append(await fn(s, url, own))

        t = time.perf_counter()
        await asyncio.gather(*(worker(bodies[i % len(bodies)]) for i in range(concurrency)))
        return Run(samples, time.perf_counter() - t)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main_async(args: argparse.Namespace) -> None:
    home = tempfile.mkdtemp(prefix="ember-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = home
    bare_env = {**env, **BARE}  # "full" is `ember proxy` as shipped
    up_port, bare_port, full_port = free_port(), free_port(), free_port()
    up = f"http://127.0.0.1:{up_port}"
    bare, full = f"http://127.0.0.1:{bare_port}", f"http://127.0.0.1:{full_port}"
    with (
        process([EMBER, "dev", "upstream", "--port", str(up_port)], env) as upstream,
        process(proxy_cmd(bare_port, up), bare_env) as bare_proxy,
        process(proxy_cmd(full_port, up), env) as proxy,
    ):
        await wait_healthy(up)
        await wait_healthy(bare)
        await wait_healthy(full)
        pids = [upstream.pid, bare_proxy.pid, proxy.pid]
        rows = await scenarios(up, {"bare": bare, "full": full}, args, pids)
        busy_rss = rss_mb(proxy.pid)
        ready, idle_rss = await startup(env, up)
    print_table(rows, args)
    print(f"\nstart-up: `ember proxy` answered /healthz 200 after {ready:.2f} s (target < 1.5 s)")
    print(
        f"memory: {idle_rss:.0f} MB RSS idle (target < 120 MB); the full proxy after the load: "
        f"{busy_rss:.0f} MB (no project in this load has memories, so no model was loaded)"
    )


async def startup(env: dict[str, str], up: str) -> tuple[float, float]:
    """A fresh `ember proxy` (defaults): seconds until /healthz answers 200, RSS 1 s later."""
    port = free_port()
    with process(proxy_cmd(port, up), env) as proc:
        ready = await wait_healthy(f"http://127.0.0.1:{port}")
        await asyncio.sleep(1.0)
        return ready, rss_mb(proc.pid)


Row = tuple[str, str, Run, Run]


async def scenarios(
    up: str, proxies: dict[str, str], args: argparse.Namespace, pids: list[int]
) -> list[Row]:
    """Every cell, each started once the emulator and both proxies are quiet (``quiet``): a
    proxy still writing what the previous cell left slowed the next direct run, and its
    ratio looked up to 0.1 better than it was."""
    rows: list[Row] = []
    js, st = body(args.body_kb, False), body(args.body_kb, True)
    # 32 agents: each client streams a conversation of its own (one request in flight per
    # session, as an agent has), not one conversation resent by every client at once.
    agents = [body(args.body_kb, True, f"agent{i}") for i in range(args.concurrency)]
    cells: tuple[tuple[str, Any, bytes | list[bytes], int], ...] = (
        ("JSON, 1 client", one_json, js, 1),
        ("stream TTFE, 1 client", one_stream, st, 1),
        (f"JSON, {args.concurrency} clients", one_json, js, args.concurrency),
        (f"stream, {args.concurrency} clients", one_stream, st, args.concurrency),
        (f"stream, {args.concurrency} sessions", one_stream, agents, args.concurrency),
    )
    for name, fn, data, conc in cells:
        waited = await quiet(pids)
        direct = await drive(up, fn, data, args.requests, conc)
        for label, url in proxies.items():
            waited += await quiet(pids)
            rows.append((name, label, direct, await drive(url, fn, data, args.requests, conc)))
        print(f"{name}: {waited:.1f} s waited for quiet cores before its cells", flush=True)
    return rows


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"\nproxy overhead — {args.requests} requests per cell, body {args.body_kb} KiB, "
        f"emulator and proxies as separate processes, loopback, {os.cpu_count()} cores\n"
        "bare = accounting only (shaping, memory, shadow and TOIN off); full = `ember proxy` "
        "defaults (output shaping + memory auto_tail + shadow memory with traffic learning + "
        "TOIN + accounting)\n"
    )
    head = (
        f"{'scenario':24} {'proxy':5} {'direct p50':>10} {'proxy p50':>10} {'added p50':>10} "
        f"{'direct p99':>10} {'proxy p99':>10} {'added p99':>10} {'req/s direct':>12} "
        f"{'req/s proxy':>12} {'ratio':>6}"
    )
    print(head)
    print("-" * len(head))
    for name, label, d, v in rows:
        print(
            f"{name:24} {label:5} {d.pct(50):9.2f}ms {v.pct(50):9.2f}ms "
            f"{v.pct(50) - d.pct(50):9.2f}ms {d.pct(99):9.2f}ms {v.pct(99):9.2f}ms "
            f"{v.pct(99) - d.pct(99):9.2f}ms {d.rate:12.0f} {v.rate:12.0f} {v.rate / d.rate:6.2f}"
        )
    print(
        "\nadded = proxy - direct at the same percentile; ratio = proxy throughput / direct "
        "(targets: added p50 <= 2 ms, p99 <= 8 ms; 32-client stream ratio >= 0.50)"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--requests", type=int, default=300, help="requests per cell")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--body-kb", type=int, default=24)
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
