"""Helpers shared by the benchmark scripts: bounded child processes and a readiness wait."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp

EMBER = str(Path(sys.executable).with_name("ember"))


@contextmanager
def process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that is always stopped (terminate, then kill after 10 s)."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def wait_healthy(url: str, timeout: float = 20.0) -> float:
    """Seconds until ``url``/healthz answered 200; raises after ``timeout``."""
    start = time.perf_counter()
    async with aiohttp.ClientSession() as s:
        while time.perf_counter() - start < timeout:
            try:
                async with s.get(url + "/healthz") as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.01)
    raise RuntimeError(f"{url} not healthy after {timeout}s")


def proxy_cmd(port: int, up: str) -> list[str]:
    """``ember proxy`` on ``port`` in front of the emulator at ``up`` (quiet logs)."""
    return [
        EMBER,
        "proxy",
        "--port",
        str(port),
        "--anthropic-url",
        up,
        "--openai-url",
        up + "/v1",
        "--log-level",
        "warning",
    ]
