"""ASGI plumbing for the emulator: reading a request, writing a rendered answer, lifespan.

Faults are produced here and only here. A *cut* answer returns from the ASGI callable without
the final ``more_body: False`` message, which makes uvicorn close the connection mid-body: the
client sees a truncated chunked stream (SSE) or fewer bytes than ``content-length`` (JSON),
exactly what a provider dropping the connection looks like.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ember.testing.render_common import Rendered

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def read_body(receive: Receive) -> bytes:
    """The whole request body (bodies arrive in several messages when large)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown; the emulator holds nothing that needs opening."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def wait_unless_disconnected(receive: Receive, seconds: float) -> bool:
    """Sleep ``seconds``; ``True`` as soon as the client disconnects instead.

    Lets a delayed answer be abandoned when the caller's timeout fired first, so a response
    that never began commits nothing (no cache write), as on the real APIs.
    """
    watcher = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({watcher}, timeout=seconds)
        return watcher in done and watcher.result().get("type") == "http.disconnect"
    finally:
        if not watcher.done():
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def send_rendered(
    send: Send,
    receive: Receive,
    rendered: Rendered,
    cut_after: int | None = None,
    delay: float = 0.0,
) -> None:
    """Write ``rendered``; ``cut_after`` SSE events (JSON: half the body) then drop it.

    Without a delay the whole answer goes out in one body message: the fast path benchmarks
    measure. With a delay, events go one by one and the loop stops as soon as the client has
    disconnected, so an abandoned slow stream does not keep a task sleeping.
    """
    await send(
        {"type": "http.response.start", "status": rendered.status, "headers": rendered.headers}
    )
    if rendered.events is None:
        if cut_after is not None:
            half = rendered.body[: len(rendered.body) // 2]
            await send({"type": "http.response.body", "body": half, "more_body": True})
            return
        await send({"type": "http.response.body", "body": rendered.body, "more_body": False})
        return
    events = rendered.events if cut_after is None else rendered.events[:cut_after]
    finished = cut_after is None
    if delay <= 0:
        body = b"".join(events)
        await send({"type": "http.response.body", "body": body, "more_body": not finished})
        return
    await _send_slowly(send, receive, events, delay, finished)


async def _send_slowly(
    send: Send, receive: Receive, events: list[bytes], delay: float, finished: bool
) -> None:
    watcher = asyncio.ensure_future(receive())
    try:
        for i, event in enumerate(events):
            if i:
                await asyncio.sleep(delay)
            if watcher.done():
                return
            await send({"type": "http.response.body", "body": event, "more_body": True})
        if finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        if not watcher.done():
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
