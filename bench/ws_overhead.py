"""What Responses over WebSocket costs through the proxy, beside the same requests over HTTP.

Runs the provider emulator (``ember dev upstream``) and a bare proxy (``ember proxy``, shaping and
memory off: the relay and accounting only) as separate processes on loopback, then sends the same
Codex-like Responses request, one client at a time:

* HTTP: ``POST /v1/responses`` with ``stream: true``, time until the last event;
* WebSocket: ``response.create`` messages on one socket, time until ``response.completed``;

each direct to the emulator and through the proxy (p50 / p99, and the proxy's ratio). Then the
time a client waits for the ``426`` when the provider does not serve WebSocket (first client: one
handshake to the provider; later clients: the remembered refusal). Every loop is bounded by a
request count; nothing leaves loopback.

    python bench/ws_overhead.py [--requests 300] [--body-kb 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable

import aiohttp

from common import EMBER, process, wait_healthy
from ember.server import free_port


def request(body_kb: int) -> dict[str, object]:
    """A Codex-like Responses request of about ``body_kb`` KiB."""
    items: list[dict[str, object]] = []
    step = 0
    while len(json.dumps(items)) < body_kb * 1024:
        items.append({"role": "user", "content": [{"type": "input_text", "text": "x" * 400}]})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"step {step} " + "ok " * 60}],
            }
        )
        step += 1
    items.append({"role": "user", "content": [{"type": "input_text", "text": "go on"}]})
    return {
        "model": "gpt-5.1",
        "instructions": "You are a coding agent.",
        "input": items,
        "prompt_cache_key": "bench-ws",
    }


def pct(samples: list[float], p: float) -> float:
    xs = sorted(samples)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


async def http_stream(session: aiohttp.ClientSession, url: str, body: bytes, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        async with session.post(
            url + "/v1/responses", data=body, headers={"content-type": "application/json"}
        ) as r:
            assert r.status == 200, r.status
            await r.read()
        out.append(time.perf_counter() - t)
    return out


async def ws_stream(session: aiohttp.ClientSession, url: str, body: bytes, n: int) -> list[float]:
    out = []
    message = b'{"type":"response.create",' + body[1:]
    async with session.ws_connect(url + "/v1/responses", max_msg_size=0) as ws:
        for _ in range(n):
            t = time.perf_counter()
            await ws.send_str(message.decode())
            while True:
                event = await ws.receive(timeout=30)
                assert event.type is aiohttp.WSMsgType.TEXT, event
                if '"response.completed"' in event.data[:60]:
                    break
            out.append(time.perf_counter() - t)
    return out


async def refusal(session: aiohttp.ClientSession, url: str) -> float:
    t = time.perf_counter()
    try:
        async with session.ws_connect(url + "/v1/responses"):
            raise AssertionError("the upgrade was accepted")
    except aiohttp.WSServerHandshakeError as exc:
        assert exc.status == 426, exc.status
    return time.perf_counter() - t


Drive = Callable[[aiohttp.ClientSession, str, bytes, int], Awaitable[list[float]]]


def proxy_cmd(port: int, anthropic_url: str, openai_url: str) -> list[str]:
    return [
        EMBER,
        "proxy",
        "--port",
        str(port),
        "--openai-url",
        openai_url,
        "--anthropic-url",
        anthropic_url,
        "--log-level",
        "warning",
    ]


async def main_async(args: argparse.Namespace) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env.update(
        EMBER_HOME=tempfile.mkdtemp(prefix="ember-bench-"),
        EMBER_OUTPUT_SHAPING="false",
        EMBER_MEMORY_MODE="off",
    )
    body = json.dumps(request(args.body_kb)).encode()
    rows = []
    up_port, px_port, nows_port = free_port(), free_port(), free_port()
    up, px = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{px_port}"
    nows = f"http://127.0.0.1:{nows_port}"
    # The emulator serves WebSocket on /v1/responses only: a proxy whose OpenAI URL ends in /v2
    # meets a provider that answers its upgrade 404, as an HTTP-only server does.
    with (
        process([EMBER, "dev", "upstream", "--port", str(up_port)], env),
        process(proxy_cmd(px_port, up, up + "/v1"), env),
        process(proxy_cmd(nows_port, up, up + "/v2"), env),
    ):
        for url in (up, px, nows):
            await wait_healthy(url)
        async with aiohttp.ClientSession() as s:
            drives: list[tuple[str, Drive]] = [
                ("HTTP stream", http_stream),
                ("WebSocket", ws_stream),
            ]
            for name, drive in drives:
                await drive(s, px, body, 20)  # warm up both paths and the caches
                direct = await drive(s, up, body, args.requests)
                proxied = await drive(s, px, body, args.requests)
                rows.append((name, direct, proxied))
            first = await refusal(s, nows)
            later = [await refusal(s, nows) for _ in range(50)]
    print(f"{args.requests} sequential requests of {len(body) // 1024} KiB, one client\n")
    print(
        f"{'transport':<14}{'direct p50':>12}{'proxy p50':>11}{'ratio':>7}"
        f"{'direct p99':>12}{'proxy p99':>11}{'ratio':>7}"
    )
    for name, direct, proxied in rows:
        d50, p50, d99, p99 = pct(direct, 50), pct(proxied, 50), pct(direct, 99), pct(proxied, 99)
        print(
            f"{name:<14}{d50:>10.2f}ms{p50:>9.2f}ms{p50 / d50:>6.2f}x"
            f"{d99:>10.2f}ms{p99:>9.2f}ms{p99 / d99:>6.2f}x"
        )
    print(
        f"\n426 when the provider has no WebSocket: first client {first * 1000:.1f} ms"
        f" (one handshake to the provider), later clients p50 {pct(later, 50):.1f} ms"
        " (remembered refusal)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--body-kb", type=int, default=24)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
