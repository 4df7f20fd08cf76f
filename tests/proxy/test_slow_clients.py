"""Slow, stalled and too many client connections: raw sockets on loopback against the real proxy.

Headers sent a byte at a time, a body that stops midway or trickles, a connection that sends
nothing, a flood of half-open connections: each is dropped within its timeout (checked with
generous slack, never tightly), the stalled body gets a 408 in its protocol's shape, and other
clients are served all the while.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, suppress
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from ember.proxy.limits import BodyTimedOut, BodyTiming, read_body
from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

#: Slack on top of a timeout before a test calls the connection held: a loaded 2-core machine
#: may run a timer late, never early.
SLACK = 8.0
HEADER_TIMEOUT = 1.0
BODY_IDLE = 1.0
MSG = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
ENDPOINTS: dict[str, Any] = {
    "/v1/messages": MSG,
    "/v1/chat/completions": {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "gpt-5", "input": "hi"},
}


@pytest.fixture
def guarded(make_stack: StackFactory) -> Stack:
    return make_stack(
        client_header_timeout=HEADER_TIMEOUT,
        client_body_idle_timeout=BODY_IDLE,
        client_body_timeout=30.0,
    )


def address(stack: Stack) -> tuple[str, int]:
    host, port = stack.url.removeprefix("http://").split(":")
    return host, int(port)


def connect(stack: Stack, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(HEADER_TIMEOUT + SLACK)
    sock.bind((source, 0))
    sock.connect(address(stack))
    return sock


def head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {length}\r\n\r\n"
    ).encode()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (raises ``TimeoutError`` if it never does)."""
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk


def served(stack: Stack) -> bool:
    r = httpx2.post(stack.url + "/v1/messages", json=MSG, timeout=20)
    return r.status_code == 200


@dataclass
class Drip:
    """A client sending ``data`` one byte every ``every`` seconds on its own thread, until the
    server closes the connection (or it runs out of bytes)."""

    sock: socket.socket
    data: bytes
    every: float
    closed_after: float | None = None
    received: bytes = b""

    def run(self) -> None:
        started = time.monotonic()
        self.sock.settimeout(0.0)
        for byte in self.data:
            # read before each byte: a byte sent after the server closed draws a reset, which
            # can throw away an answer not read yet
            if self._ended():
                break
            try:
                self.sock.sendall(bytes([byte]))
            except OSError:  # reset or broken pipe: closed
                break
            time.sleep(self.every)
        self.closed_after = time.monotonic() - started

    def _ended(self) -> bool:
        """Whether the server answered or closed (reads what is there, never waits)."""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                return b"\r\n\r\n" in self.received
            except OSError:
                return True
            if not chunk:
                return True
            self.received += chunk


@pytest.fixture
def dripping() -> Iterator[list[threading.Thread]]:
    threads: list[threading.Thread] = []
    yield threads
    for t in threads:
        t.join(HEADER_TIMEOUT + SLACK + 5)


def start(drip: Drip, threads: list[threading.Thread]) -> threading.Thread:
    thread = threading.Thread(target=drip.run, daemon=True)
    thread.start()
    threads.append(thread)
    return thread


# -- headers ------------------------------------------------------------------------------------


def test_headers_sent_a_byte_at_a_time_are_dropped_and_others_are_served(
    guarded: Stack, dripping: list[threading.Thread]
) -> None:
    body = json.dumps(MSG).encode()
    # 0.1 s a byte: these headers would take ~12 s to arrive, the limit is 1 s
    drip = Drip(connect(guarded), head("/v1/messages", len(body)) + body, every=0.1)
    with closing(drip.sock):
        thread = start(drip, dripping)
        assert served(guarded), "another client must be served while one drips"
        thread.join(HEADER_TIMEOUT + SLACK)
    assert not thread.is_alive(), "the dripping connection was never dropped"
    assert drip.closed_after is not None and drip.closed_after < HEADER_TIMEOUT + SLACK
    assert drip.closed_after >= HEADER_TIMEOUT * 0.5  # a timer never fires (much) early
    assert drip.received.startswith(b"HTTP/1.1 408")
    assert guarded.emulator.requests and len(guarded.emulator.requests) == 1  # only the other
    assert served(guarded)


def test_a_connection_that_sends_nothing_is_closed(guarded: Stack) -> None:
    with closing(connect(guarded)) as sock:
        started = time.monotonic()
        assert read_until_closed(sock) == b""  # closed without a word: no request began
        assert time.monotonic() - started < HEADER_TIMEOUT + SLACK


def test_a_kept_alive_connection_gets_the_header_timeout_for_its_next_request(
    guarded: Stack,
) -> None:
    body = json.dumps(MSG).encode()
    with closing(connect(guarded)) as sock:
        sock.sendall(head("/v1/messages", len(body)) + body)
        first = b""
        while not first.rstrip().endswith(b"}"):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"POST /v1/mess")  # the next request's first bytes, then nothing
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408")


# -- bodies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_a_body_that_stops_midway_gets_a_408_in_the_protocols_shape(
    guarded: Stack, path: str
) -> None:
    body = json.dumps(ENDPOINTS[path]).encode()
    with closing(connect(guarded)) as sock:
        sock.sendall(head(path, len(body)) + body[: len(body) // 2])
        started = time.monotonic()
        answer = read_until_closed(sock)  # the server closes after its answer
        assert time.monotonic() - started < BODY_IDLE + SLACK
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 408")
    headers, _, payload = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in headers.lower()
    err = json.loads(payload)
    if path == "/v1/messages":
        assert err["type"] == "error" and set(err["error"]) == {"type", "message"}
    else:
        assert set(err["error"]) == {"message", "type", "param", "code"}
    message = err["error"]["message"]
    assert message.startswith("ember: ") and "EMBER_CLIENT_BODY_IDLE_TIMEOUT" in message
    assert guarded.emulator.requests == []
    assert served(guarded)


def test_a_body_that_trickles_past_the_whole_body_timeout_gets_a_408(
    make_stack: StackFactory, dripping: list[threading.Thread]
) -> None:
    stack = make_stack(client_body_idle_timeout=5.0, client_body_timeout=1.0)
    body = json.dumps(MSG).encode()
    sock = connect(stack)
    with closing(sock):
        sock.sendall(head("/v1/messages", len(body)))
        drip = Drip(sock, body, every=0.2)  # never idle for 5 s, never done in 1 s
        thread = start(drip, dripping)
        assert served(stack)
        thread.join(1.0 + SLACK)
        assert not thread.is_alive()
        sock.settimeout(SLACK)
        answer = drip.received + read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408")
    assert (
        "EMBER_CLIENT_BODY_TIMEOUT"
        in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]
    )


def test_a_slow_but_steady_body_is_served(make_stack: StackFactory) -> None:
    stack = make_stack(client_body_idle_timeout=3.0, client_body_timeout=60.0)
    body = json.dumps(MSG).encode()
    pieces = [body[i : i + 4] for i in range(0, len(body), 4)]

    def steady() -> Iterator[bytes]:
        for piece in pieces:
            time.sleep(0.2)  # each pause well under the idle timeout; in all, over 3 s
            yield piece

    assert len(pieces) * 0.2 > 3.0
    r = httpx2.post(stack.url + "/v1/messages", content=steady(), timeout=60)
    assert r.status_code == 200


def test_a_body_nobody_reads_any_more_is_not_waited_for(make_stack: StackFactory) -> None:
    """After a 413 (announced too large) uvicorn would discard the rest of the body for as
    long as the client sent it; the backstop closes the connection once it stalls."""
    stack = make_stack(max_body_mb=1, client_body_idle_timeout=BODY_IDLE)
    with closing(connect(stack)) as sock:
        sock.sendall(head("/v1/messages", 2 << 20) + b"{")
        started = time.monotonic()
        answer = read_until_closed(sock)
        assert time.monotonic() - started < BODY_IDLE + 2.0 + SLACK  # 2.0: the backstop's grace
    assert answer.startswith(b"HTTP/1.1 413")


def test_a_64_mib_body_passes_with_the_default_timeouts(stack: Stack) -> None:
    big = b"x" * (64 << 20)
    r = httpx2.post(
        stack.url + "/v1/uploads-test", content=big, headers={"x-api-key": "k"}, timeout=120
    )
    assert r.status_code == 404  # the emulator's answer: ember read and forwarded all of it
    assert len(stack.emulator.last_request.body) == len(big)


# -- connections per client address --------------------------------------------------------------


def test_a_flood_of_half_open_connections_is_bounded_per_address(
    make_stack: StackFactory,
) -> None:
    limit, flood = 20, 300
    stack = make_stack(client_max_connections=limit, client_header_timeout=30.0)
    with ExitStack() as held:
        socks = [held.enter_context(closing(connect(stack))) for _ in range(flood)]
        alive = _still_open(socks)
        assert len(alive) <= limit, f"{len(alive)} of {flood} held, the limit is {limit}"
        # another address is another client: served while 127.0.0.1 is at its limit
        assert _answer_from(stack, "127.0.0.2").startswith(b"HTTP/1.1 200")
        assert served_health(stack, "127.0.0.3")
    # once the held connections go, 127.0.0.1 is served again
    deadline = time.monotonic() + SLACK
    while not _healthy(stack) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert served(stack)


def _still_open(socks: list[socket.socket]) -> list[socket.socket]:
    """The sockets the server has not closed once it refused the excess (bounded wait: a
    refused socket becomes readable, with end of file or a reset)."""
    open_ = list(socks)
    deadline = time.monotonic() + SLACK
    while time.monotonic() < deadline:
        readable, _, _ = select.select(open_, [], [], 0.5)
        for sock in readable:
            sock.settimeout(0.0)
            with suppress(ConnectionResetError):
                assert sock.recv(1) == b""
            open_.remove(sock)
        if not readable and len(open_) < len(socks):
            return open_  # a quiet half-second after the refusals: the rest are held
    return open_


def _answer_from(stack: Stack, source: str) -> bytes:
    body = json.dumps(MSG).encode()
    with closing(connect(stack, source)) as sock:
        sock.sendall(
            head("/v1/messages", len(body)).replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n")
            + body
        )
        return read_until_closed(sock)


def served_health(stack: Stack, source: str) -> bool:
    with closing(connect(stack, source)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        return read_until_closed(sock).startswith(b"HTTP/1.1 200")


def _healthy(stack: Stack) -> bool:
    try:
        return httpx2.get(stack.url + "/healthz", timeout=2).status_code == 200
    except httpx2.HTTPError:
        return False


# -- the body reader on its own -----------------------------------------------------------------


async def test_the_reader_gives_up_on_a_body_that_stops() -> None:
    calls: list[int] = []

    async def receive() -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.Event().wait()  # never comes
        raise AssertionError

    with pytest.raises(BodyTimedOut) as err:
        await read_body(receive, {}, 1 << 20, BodyTiming(idle=0.01, total=60.0))
    assert err.value.which == "idle" and len(calls) == 2


async def test_the_reader_gives_up_on_a_body_past_its_whole_time() -> None:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"type": "http.request", "body": b" ", "more_body": True}

    with pytest.raises(BodyTimedOut) as err:
        await read_body(receive, {}, 1 << 30, BodyTiming(idle=60.0, total=0.01))
    assert err.value.which == "total"


async def test_the_reader_without_timing_waits_as_before() -> None:
    parts = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return parts.pop()

    assert await read_body(receive, {}, 100) == b"{}"
