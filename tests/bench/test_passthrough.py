"""bench/passthrough.py, the floor ``bench/stream_floor.py`` compares ember with: it must be a
real pass-through (the provider's answer, whole), or the floor would flatter itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import aiohttp
import pytest

from ember.server import BackgroundServer, free_port
from ember.testing import Emulator
from tests.bench.conftest import BENCH, bench_module


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


@pytest.fixture
def floor_url(emulator_url: str) -> Iterator[str]:
    port = free_port()
    script = str(BENCH / "passthrough.py")
    proc = subprocess.Popen([sys.executable, script, str(port), emulator_url])
    try:
        url = f"http://127.0.0.1:{port}"
        with bench_module("common") as common:
            asyncio.run(common.wait_healthy(url, timeout=20))
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


async def _events(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, list[str]]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(url + "/v1/messages", data=body, headers=headers) as r,
    ):
        raw = await r.read()
    return r.status, [line for line in raw.decode().splitlines() if line.startswith("event:")]


def test_the_floor_relays_every_event_of_a_streamed_answer(
    emulator_url: str, floor_url: str
) -> None:
    with bench_module("proxy_overhead") as po:
        body, headers = po.body(4, True, "floor-test"), po.HEADERS
    direct = asyncio.run(_events(emulator_url, body, headers))
    relayed = asyncio.run(_events(floor_url, body, headers))
    assert direct[0] == relayed[0] == 200
    assert relayed[1] == direct[1] and "event: message_stop" in relayed[1]
