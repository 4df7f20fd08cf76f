"""bench/common.py's ``quiet``: a cell starts once the processes it waits on are idle, and a
process that never goes idle cannot hold the bench beyond the timeout."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.bench.conftest import bench_module


def child(code: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def idle() -> Iterator[subprocess.Popen[bytes]]:
    yield from child("import time; time.sleep(60)")


@pytest.fixture
def spinning() -> Iterator[subprocess.Popen[bytes]]:
    yield from child("while True: pass")


def test_an_idle_process_is_quiet_at_once(idle: subprocess.Popen[bytes]) -> None:
    with bench_module("common") as common:
        waited = asyncio.run(common.quiet([idle.pid], timeout=5.0, window=0.1))
    assert waited < 2.0  # a window or a few (the interpreter's own start), never the timeout


def test_a_busy_process_holds_the_cell_only_until_the_timeout(
    spinning: subprocess.Popen[bytes],
) -> None:
    with bench_module("common") as common:
        waited = asyncio.run(common.quiet([spinning.pid], timeout=0.6, window=0.1))
    assert 0.6 <= waited < 2.0
