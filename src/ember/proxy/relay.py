"""Moving one answer from the provider to the client.

Invariants:
- Every chunk is sent to the client as soon as it arrives (no buffering of a stream); the
  chunks are also kept for the tee that assembles the final message after the client has it.
- A stream the provider cuts is cut for the client too (the response is left unfinished, so
  the client's SDK raises instead of taking a truncated answer for a complete one).
- A client that goes away stops the upstream read at once, so the provider stops generating
  (and billing) an answer nobody will read; the outcome is ``cancelled``.
- Failures before the first byte become a JSON error in the protocol's own shape (502 when the
  provider cannot be reached, 504 on timeout) — the client's SDK can parse it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from ember.errors import UpstreamError, UpstreamTimeout
from ember.proxy.delivery import Delivered
from ember.proxy.upstream import Upstream, response_headers

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
ErrorBody = Callable[[int, str], bytes]

_JSON = [(b"content-type", b"application/json")]
STREAM_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)


async def send_json(
    send: Send,
    status: int,
    body: bytes,
    *,
    close: bool = False,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """One whole JSON answer; ``close``: the connection ends after it (an unread request body
    is never read on: a 408)."""
    headers = [*_JSON, (b"content-length", str(len(body)).encode()), *extra]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _DisconnectWatch:
    """Cancels the relaying task when the client disconnects before the answer is complete."""

    def __init__(self, receive: Receive) -> None:
        self.disconnected = False
        self.finished = False
        self._task = asyncio.current_task()
        self._watch = asyncio.ensure_future(receive())
        self._watch.add_done_callback(self._on_done)

    def _on_done(self, fut: asyncio.Future[Any]) -> None:
        if self.finished or fut.cancelled() or self._task is None:
            return
        if fut.exception() is None and fut.result().get("type") == "http.disconnect":
            self.disconnected = True
            self._task.cancel()

    def close(self) -> None:
        self.finished = True
        if not self._watch.done():
            self._watch.cancel()


Work = Callable[[Send, Delivered], Awaitable[None]]


async def watched(receive: Receive, send: Send, work: Work) -> Delivered:
    """Run ``work`` (which answers the client through the ``send`` it is given) under a
    disconnect watch: a client that goes away cancels the work and the outcome is
    ``cancelled``."""
    watch = _DisconnectWatch(receive)
    result = Delivered(status=0, kind="ok", streamed=False)

    async def guarded_send(message: dict[str, Any]) -> None:
        # Once the last body message is on its way the answer is complete: the disconnect
        # that uvicorn reports after it must not cancel whatever this task does next.
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            watch.finished = True
        await send(message)

    try:
        await work(guarded_send, result)
    except asyncio.CancelledError:
        if not watch.disconnected:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        result.kind = "cancelled"
        result.error = "client disconnected"
    finally:
        watch.close()
    return result


async def relay(
    upstream: Upstream,
    receive: Receive,
    send: Send,
    *,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    error_body: ErrorBody,
) -> Delivered:
    """Forward one request and pass the answer through as it arrives."""
    started = time.perf_counter()

    async def work(send: Send, result: Delivered) -> None:
        result.sent = body
        resp = await open_upstream(upstream, send, method, url, headers, body, error_body, result)
        if resp is None:
            return
        async with resp:
            result.status = resp.status
            result.ttfb_ms = (time.perf_counter() - started) * 1000
            if resp.status >= 400:
                result.kind = "upstream_error"
            if resp.headers.get("content-type", "").startswith("text/event-stream"):
                result.streamed = True
                await _stream(resp, send, result)
            else:
                await _whole(resp, send, result, error_body)

    return await watched(receive, send, work)


async def open_upstream(
    upstream: Upstream,
    send: Send,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    error_body: ErrorBody,
    result: Delivered,
) -> aiohttp.ClientResponse | None:
    """The upstream response, or None after answering the client with a 502/504."""
    try:
        return await upstream.send(method, url, headers, body)
    except UpstreamError as exc:
        result.status = 504 if isinstance(exc, UpstreamTimeout) else 502
        result.kind = "timeout" if isinstance(exc, UpstreamTimeout) else "unreachable"
        result.error = str(exc)
        log.warning("upstream failed status=%d error=%s", result.status, exc)
        await send_json(send, result.status, error_body(result.status, f"ember: {exc}"))
        return None


async def _whole(
    resp: aiohttp.ClientResponse, send: Send, result: Delivered, error_body: ErrorBody
) -> None:
    try:
        data = await resp.read()
    except STREAM_ERRORS as exc:
        await answer_cut(send, result, error_body, exc)
        return
    result.chunks.append(data)
    headers = response_headers(resp.headers.items())
    headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


#: What the client is told when a JSON answer breaks off before its end. Plain words: the
#: transport's own text (``ContentLengthError: 400, message='Not enough data...'``) means
#: nothing to a user and names ember's HTTP library; it goes to the log instead.
CUT_MESSAGE = "ember: the provider's answer was cut before it was complete"


async def answer_cut(
    send: Send, result: Delivered, error_body: ErrorBody, exc: BaseException
) -> None:
    """A JSON (non-streamed) answer the provider cut mid-body: nothing of it reached the
    client yet, so the client gets a 502 in its protocol's error shape saying so; the outcome
    is ``cut`` and the transport's own error is kept for the log."""
    result.status, result.kind = 502, "cut"
    result.error = f"provider cut the answer: {exc!r}"
    log.warning("upstream answer cut mid-body: %r", exc)
    await send_json(send, 502, error_body(502, CUT_MESSAGE))


async def _stream(resp: aiohttp.ClientResponse, send: Send, result: Delivered) -> None:
    headers = response_headers(resp.headers.items())
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    try:
        async for chunk in resp.content.iter_any():
            result.chunks.append(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except STREAM_ERRORS as exc:
        # Leave the response unfinished: the server closes the connection without the final
        # chunk, which is how the client learns the stream was cut.
        result.kind = "cut"
        result.error = f"provider cut the stream: {exc!r}"
        log.warning("upstream stream cut after %d chunks: %r", len(result.chunks), exc)
        return
    if resp.content.exception() is not None:  # pragma: no cover - defensive
        result.kind = "cut"
        return
    with contextlib.suppress(Exception):
        await send({"type": "http.response.body", "body": b"", "more_body": False})
