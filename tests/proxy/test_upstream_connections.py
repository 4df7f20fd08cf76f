"""A provider that drops, refuses or black-holes connections: the client gets an answer or a
clear 502/504 within the connect timeout, never a wait on TCP's retransmission backoff.

Why each rule exists is measured in ``bench/upstream_backlog.py`` and explained in
``ember.proxy.connector``. Everything here is loopback; every load loop is bounded by a count
and every request by a client timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx2
import pytest

from ember.server import free_port
from ember.testing import Reply
from tests.conftest import Stack, StackFactory

MSG = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
linux_only = pytest.mark.skipif(
    sys.platform != "linux", reason="relies on Linux accept-queue and TCP_USER_TIMEOUT behaviour"
)


def _post(stack: Stack, timeout: float = 30.0) -> tuple[httpx2.Response, float]:
    started = time.perf_counter()
    r = httpx2.post(stack.url + "/v1/messages", json=MSG, headers=HEADERS, timeout=timeout)
    return r, time.perf_counter() - started


def _opened(stack: Stack) -> int:
    connector = stack.app.upstream.connector
    assert connector is not None
    return connector.opened


def test_refused_connection_is_502_within_connect_timeout(make_stack: StackFactory) -> None:
    stack = make_stack(upstream=f"http://127.0.0.1:{free_port()}", upstream_connect_timeout=5.0)
    r, elapsed = _post(stack)
    assert r.status_code == 502
    assert r.json()["type"] == "error" and "cannot reach provider" in r.json()["error"]["message"]
    assert elapsed < 1.0, f"a refused connection took {elapsed:.2f}s to report"


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A listening socket whose accept queue is full and never drained: the kernel drops every
    further SYN, exactly what an overloaded provider does."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        held: list[socket.socket] = []
        try:
            for _ in range(4):  # one fills a backlog of 0; a few more in case the kernel rounds
                s = socket.socket()
                s.settimeout(0.3)
                held.append(s)
                try:
                    s.connect(("127.0.0.1", port))
                except TimeoutError:
                    break
            else:
                pytest.fail("the accept queue never filled: no black hole to test against")
            yield f"http://127.0.0.1:{port}"
        finally:
            for s in held:
                s.close()


@linux_only
def test_blackholed_provider_is_504_within_connect_timeout(
    make_stack: StackFactory, blackhole: str
) -> None:
    stack = make_stack(upstream=blackhole, upstream_connect_timeout=1.0)
    r, elapsed = _post(stack)
    assert r.status_code == 504
    message = r.json()["error"]["message"]
    assert "connect timeout" in message and "upstream_connect_timeout" in message
    assert 0.9 < elapsed < 3.0, f"black-holed SYNs answered after {elapsed:.2f}s"


@linux_only
def test_burst_against_blackholed_provider_all_504_within_connect_timeout_not_queued(
    make_stack: StackFactory, blackhole: str
) -> None:
    """Waiting for an opening turn counts against the connect timeout: 50 requests behind 8
    turns must not time out one turn after another (50 / 8 x 1 s)."""
    stack = make_stack(upstream=blackhole, upstream_connect_timeout=1.0)
    results = asyncio.run(_burst(stack.url, 50, timeout=15.0))
    assert all(status == 504 for _, status, _ in results)
    slowest = max(t for t, _, _ in results)
    assert slowest < 3.0, f"slowest 504 after {slowest:.2f}s"


@pytest.fixture
def deaf_provider() -> Iterator[str]:
    """A provider whose kernel takes the connection but never takes the request: it is accepted
    and never read, with a tiny receive buffer, so a large request stays unacknowledged (what a
    connection whose handshake ACK the provider dropped looks like to the client)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@linux_only
def test_request_the_provider_never_acknowledges_is_504_not_a_read_timeout_wait(
    make_stack: StackFactory, deaf_provider: str
) -> None:
    stack = make_stack(
        upstream=deaf_provider, upstream_connect_timeout=1.0, upstream_read_timeout=10.0
    )
    big = {**MSG, "messages": [{"role": "user", "content": "x" * 200_000}]}
    started = time.perf_counter()
    r = httpx2.post(stack.url + "/v1/messages", json=big, headers=HEADERS, timeout=15)
    elapsed = time.perf_counter() - started
    assert r.status_code == 504
    assert "did not acknowledge the request" in r.json()["error"]["message"]
    assert elapsed < 5.0, f"an unacknowledged request waited {elapsed:.2f}s"


def test_full_pool_is_504_within_connect_timeout_not_a_hang(make_stack: StackFactory) -> None:
    stack = make_stack(upstream_connect_timeout=0.5, upstream_max_connections_per_host=1)
    stack.emulator.script(Reply("slow stream " * 8, delay=0.2))
    with httpx2.stream(
        "POST", stack.url + "/v1/messages", json={**MSG, "stream": True}, headers=HEADERS
    ) as first:
        assert first.status_code == 200
        r, elapsed = _post(stack)
        assert r.status_code == 504
        assert "connections to it are busy" in r.json()["error"]["message"]
        assert elapsed < 2.0
        assert b"message_stop" in first.read()


def test_keepalive_connection_is_reused_not_reopened_per_request(stack: Stack) -> None:
    """Also guards the connector hook: if aiohttp stopped calling ``_create_connection``
    nothing would be counted (and nothing paced)."""
    for _ in range(5):
        r, _ = _post(stack)
        assert r.status_code == 200
    assert _opened(stack) == 1


async def _stream(session: aiohttp.ClientSession, url: str) -> tuple[float, int, bool]:
    body = json.dumps({**MSG, "stream": True}).encode()
    started = time.perf_counter()
    try:
        async with session.post(url + "/v1/messages", data=body, headers=HEADERS) as r:
            data = await r.read()
            return time.perf_counter() - started, r.status, b"message_stop" in data
    except (aiohttp.ClientError, TimeoutError):
        return time.perf_counter() - started, 0, False


async def _burst(url: str, n: int, timeout: float) -> list[tuple[float, int, bool]]:
    connector = aiohttp.TCPConnector(limit=0)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=client_timeout) as session:
        return await asyncio.gather(*(_stream(session, url) for _ in range(n)))


@contextlib.contextmanager
def provider_process(backlog: int, log: Path) -> Iterator[str]:
    """``ember dev upstream`` in its own process, as a provider is: an emulator in the test's
    process shares its interpreter with the proxy and 200 clients, and its accept loop was
    starved long enough to drop connections past any SYN retry late in a full suite run."""
    port = free_port()
    cmd = [sys.executable, "-m", "ember", "dev", "upstream", "--port", str(port)]
    cmd += ["--backlog", str(backlog), "--log", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@linux_only
def test_200_concurrent_streams_against_backlog_5_all_answered_quickly(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    log = tmp_path / "provider.jsonl"
    with provider_process(5, log) as provider:
        # A SYN dropped by a full backlog is sent again after 1, 3 and 7 s: 8 s allows four
        # tries, so a provider whose accept loop is busy for a moment (a slow or busy
        # machine; this failed 77 of 200 at 5 s there) still gets every connection, while
        # the bound below keeps what the test is about: seconds, never 27-110 s.
        stack = make_stack(upstream=provider, upstream_connect_timeout=8.0)
        results = asyncio.run(_burst(stack.url, 200, timeout=20.0))
        unanswered = [r for r in results if r[1] != 200 or not r[2]]
        slowest = max(r[0] for r in results)
        assert not unanswered, f"{len(unanswered)} of 200 streams unanswered: {unanswered[:3]}"
        assert slowest < 12.0, f"slowest stream took {slowest:.2f}s"
    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(1 for r in received if r.get("path") == "/v1/messages") == 200
