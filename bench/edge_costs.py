"""What two guards at the proxy's edge cost: masking credentials in a log line, and counting a
request's header bytes.

1. Log lines. Every record a handler of ``ember.logs`` writes passes ``MaskCredentials`` first.
   Each line below is formatted by a handler with the filter and by one without; "added" is the
   median of their per-pair difference. A line with none of the cheap hints is one regex
   search; a hinted one pays for the secret detector.
2. Header bytes. A typical SDK request (15 headers, a 4 KB body) is fed to the proxy's guarded
   protocol (``ember.proxy.clientguard``) on a fresh connection, with the header-size checks
   and with them bypassed (the parent's ``data_received`` and ``on_headers_complete``); the
   app is never run. "added" is again the median of per-pair differences.

    python bench/edge_costs.py [--repeat 31]

Times are per line / per request, in µs, with the garbage collector paused.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from ember.logs import MaskCredentials
from ember.proxy import clientguard

LINES: list[tuple[str, str, tuple[Any, ...]]] = [
    (
        "INFO, no hint",
        "shadow: session %s stored %d facts (ids %s); run %s",
        ("s-dacbdef5474cbce6aee484e9", 2, "m_1a2b, m_3c4d", "r_90e440824552"),
    ),
    (
        "WARNING, no hint",
        "closed client connections: %s (limits: headers %gs, %d connections per address)",
        ("3 without headers in 30s", 30.0, 512),
    ),
    ("INFO, hinted", "memory: ask project_key=%s injected %d", ("proj-29ccbcbce9441d72", 3)),
    ("DEBUG handshake", "< %s: %s", ("authorization", "Bearer sk-proj-" + "Ab3" * 16)),
]


def _paired(a: Callable[[], None], b: Callable[[], None], n: int, repeat: int) -> tuple[float, ...]:
    """Median per-call µs of ``a``, of ``b``, and of their per-pair difference."""
    ta, tb, diff = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            a()
        mid = time.perf_counter()
        for _ in range(n):
            b()
        end = time.perf_counter()
        ta.append((mid - start) / n * 1e6)
        tb.append((end - mid) / n * 1e6)
        diff.append(tb[-1] - ta[-1])
    return statistics.median(ta), statistics.median(tb), statistics.median(diff)


def log_lines(repeat: int) -> None:
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S")
    plain = logging.StreamHandler(io.StringIO())
    masked = logging.StreamHandler(io.StringIO())
    for h in (plain, masked):
        h.setFormatter(fmt)
    masked.addFilter(MaskCredentials())

    def record(msg: str, args: tuple[Any, ...]) -> logging.LogRecord:
        return logging.LogRecord("ember.x", logging.INFO, __file__, 1, msg, args, None)

    print("\nlog line                   plain µs   masked µs    added µs")
    for name, msg, args in LINES:
        base, with_mask, added = _paired(
            lambda m=msg, a=args: plain.handle(record(m, a)),
            lambda m=msg, a=args: masked.handle(record(m, a)),
            2000,
            repeat,
        )
        print(f"{name:24s} {base:10.2f} {with_mask:11.2f} {added:11.2f}")


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8787)}.get(
            name, default
        )

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _app(scope: Any, receive: Any, send: Any) -> None:
    pass


def _request() -> bytes:
    headers = [
        ("host", "127.0.0.1:8787"),
        ("accept", "application/json"),
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
        ("user-agent", "Anthropic/Python 2.17.0"),
        ("x-api-key", "sk-ant-" + "a" * 90),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", "2.17.0"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
        ("x-stainless-runtime-version", "3.11.7"),
        ("x-stainless-retry-count", "0"),
        ("x-stainless-read-timeout", "600"),
        ("x-ember-cwd", "/home/dev/acme-api"),
    ]
    body = '{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user",'
    body += '"content":"' + "x" * 4000 + '"}]}'
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return f"POST /v1/messages HTTP/1.1\r\n{head}content-length: {len(body)}\r\n\r\n{body}".encode()


class _Handle:
    """A task or timer that never runs (the app is not what is measured)."""

    def cancel(self) -> None:
        pass

    def add_done_callback(self, fn: Any) -> None:
        pass


class _Loop:
    """The loop calls the protocol makes, answered without scheduling anything."""

    def create_task(self, coro: Any, **kw: Any) -> _Handle:
        coro.close()
        return _Handle()

    def call_later(self, delay: float, fn: Any, *args: Any) -> _Handle:
        return _Handle()

    def time(self) -> float:
        return time.monotonic()


def header_bytes(repeat: int) -> None:
    limits = clientguard.ClientLimits(30.0, 30.0, 300.0, 512)
    guarded = clientguard.guarded_protocol(limits)

    class Bypassed(guarded):  # type: ignore[misc, valid-type]
        data_received = HttpToolsProtocol.data_received

        def on_headers_complete(self) -> None:
            self._cancel()
            HttpToolsProtocol.on_headers_complete(self)
            now = self.loop.time()
            self._body_since = self._body_last = now
            self._arm(self._body_wait(now), self._body_check)

    config = Config(_app, log_config=None)
    config.load()
    state = ServerState()
    request = _request()
    loop = _Loop()

    def one(cls: type[HttpToolsProtocol]) -> Callable[[], None]:
        def run() -> None:
            proto = cls(config=config, server_state=state, app_state={}, _loop=loop)
            proto.connection_made(_Transport())
            proto.data_received(request)
            proto.connection_lost(None)
            state.tasks.clear()

        return run

    base, checked, added = _paired(one(Bypassed), one(guarded), 2000, repeat)
    print(f"\nrequest of {len(request)} bytes   bypassed µs   checked µs    added µs")
    print(f"{'header-size checks':24s} {base:12.2f} {checked:12.2f} {added:11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=31)
    args = parser.parse_args()
    gc.disable()
    log_lines(args.repeat)
    header_bytes(args.repeat)


if __name__ == "__main__":
    main()
