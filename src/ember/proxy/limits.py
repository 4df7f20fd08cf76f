"""What a client may send: body size, how long the body may take, JSON nesting depth, and the
answers past them.

Invariants:
- A body whose ``content-length`` is past ``max_body_mb`` is refused before a byte of it is
  read; a chunked body is read only until it passes the limit. Either way the client gets a 413
  in its protocol's error shape, and an oversized body costs the proxy at most the limit (plus
  one chunk) of memory, nothing when its length was announced: a 200 MB body used to grow the
  proxy to 443 MB.
- A body nested deeper than ``max_json_depth`` is a 400 that names the limit. A 100k-deep body
  used to reach the recursive ``json`` parser and come back as a 500.
- A body that pauses longer than ``client_body_idle_timeout`` between two chunks, or takes
  longer than ``client_body_timeout`` in all, is a 408 in the protocol's error shape, and the
  connection is closed (the rest of that body is never read). A body that stopped midway used
  to be waited for as long as the client kept the connection open. Connections that never
  finish their headers, and a body nobody reads any more, are bounded a layer below, where the
  bytes arrive (``ember.proxy.clientguard``).
- Every message says which setting raises the limit, so the fix is in the error itself.

The byte counting is here; the depth check lives in the parser (``JsonDoc``), where orjson
does it for almost nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ember.config import Settings
from ember.errors import NestingTooDeep, ProtocolError, RequestTooLarge
from ember.protocols.jsonedit import JsonDoc
from ember.proxy.relay import Receive

#: ``max_body_mb`` counts MiB.
MIB = 1 << 20


def body_limit(settings: Settings) -> int:
    """The largest body accepted, in bytes."""
    return settings.max_body_mb * MIB


class BodyTimedOut(ProtocolError):
    """A request body that paused too long between chunks (``idle``) or took too long in all
    (``total``); answered 408, and the rest of it is never read."""

    def __init__(self, which: Literal["idle", "total"], seconds: float) -> None:
        self.which = which
        self.seconds = seconds
        what = "paused longer than" if which == "idle" else "took longer than"
        super().__init__(f"request body {what} {seconds:g}s")


@dataclass(frozen=True)
class BodyTiming:
    """How long a body may pause between chunks, and take in all (seconds)."""

    idle: float
    total: float


def body_timing(settings: Settings) -> BodyTiming:
    return BodyTiming(settings.client_body_idle_timeout, settings.client_body_timeout)


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The ``content-length`` the client announced, or ``None`` (chunked, or unreadable:
    the byte count while reading then decides)."""
    raw = headers.get("content-length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


async def read_body(
    receive: Receive, headers: Mapping[str, str], limit: int, timing: BodyTiming | None = None
) -> bytes:
    """The whole request body, or ``RequestTooLarge`` as soon as it is known to pass ``limit``
    bytes: at once from ``content-length``, else when the chunks read so far pass it. What was
    read is dropped; uvicorn discards the rest of the body after the answer, in constant
    memory, so the client can finish sending and read the 413 instead of a reset.

    With ``timing``: ``BodyTimedOut`` when the next chunk takes longer than ``timing.idle``,
    or the whole body longer than ``timing.total``."""
    declared = declared_length(headers)
    if declared is not None and declared > limit:
        raise RequestTooLarge(limit)
    parts: list[bytes] = []
    size = 0
    deadline = None if timing is None else asyncio.get_running_loop().time() + timing.total
    while True:
        message = await _next_message(receive, timing, deadline)
        if message["type"] == "http.disconnect":
            raise ConnectionAbortedError("client disconnected while sending the request")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(limit)
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


async def _next_message(
    receive: Receive, timing: BodyTiming | None, deadline: float | None
) -> dict[str, Any]:
    if timing is None or deadline is None:
        return await receive()
    left = deadline - asyncio.get_running_loop().time()
    which: Literal["idle", "total"] = "idle" if timing.idle < left else "total"
    if left <= 0:
        raise BodyTimedOut("total", timing.total)
    try:
        async with asyncio.timeout(min(timing.idle, left)):
            return await receive()
    except TimeoutError:
        raise BodyTimedOut(which, timing.idle if which == "idle" else timing.total) from None


def too_large_message(settings: Settings) -> str:
    return (
        f"request body is larger than the proxy's {settings.max_body_mb} MiB limit; "
        "raise it with EMBER_MAX_BODY_MB (max_body_mb in config.toml)"
    )


def timed_out_message(exc: BodyTimedOut) -> str:
    key = "client_body_idle_timeout" if exc.which == "idle" else "client_body_timeout"
    return (
        f"{exc}; the proxy stopped waiting for the rest of it. Raise the limit with "
        f"EMBER_{key.upper()} ({key} in config.toml)"
    )


def too_deep_message(settings: Settings) -> str:
    return (
        f"request body is JSON nested more than {settings.max_json_depth} levels deep, the "
        "proxy's limit; raise it with EMBER_MAX_JSON_DEPTH (max_json_depth in config.toml)"
    )


def parse_body(body: bytes, settings: Settings) -> JsonDoc:
    """The body as a ``JsonDoc``; ``ProtocolError`` (a 400) when it is not JSON or nested past
    ``max_json_depth``, with a message that names the setting."""
    try:
        return JsonDoc(body, max_depth=settings.max_json_depth)
    except NestingTooDeep as exc:
        raise ProtocolError(too_deep_message(settings)) from exc
