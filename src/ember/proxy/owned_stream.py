"""Owned tools over a streamed answer: the client gets the answer as it comes.

The provider's events go to the client one by one through the wire format's ``Splice``; when
an owned call starts, the rest of that round is held back and read whole, the calls are run,
and the provider is asked again with their results (``TOOLING.continue_with``), up to
``MAX_ROUNDS`` (the last round forbids tools). Each continuation streams on as more of the same
answer. What the client never sees: the owned calls and the hidden rounds' own openings and
endings.

Failures: before anything reached the client, they are answered as any relay answers them
(an error in the protocol's shape, the provider's error status and body); once the answer has
begun, a continuation that fails leaves the stream unfinished, so the client's SDK raises
rather than take a cut answer for a whole one.
"""

from __future__ import annotations

import contextlib
import time

import aiohttp

from ember.exchange import OwnedTools
from ember.protocols.assemble import assemble
from ember.protocols.base import ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.splice import Splice, splice_for
from ember.protocols.sse import RawEvents
from ember.protocols.tooling import TOOLING
from ember.proxy.delivery import Delivered
from ember.proxy.owned_rounds import (
    MAX_ROUNDS,
    add_hidden_usage,
    read_whole,
    replay_whole,
    run_calls,
)
from ember.proxy.relay import STREAM_ERRORS, Receive, Send, open_upstream, watched
from ember.proxy.upstream import Upstream, response_headers


async def relay_spliced(
    upstream: Upstream,
    receive: Receive,
    send: Send,
    *,
    adapter: ProtocolAdapter,
    url: str,
    headers: list[tuple[str, str]],
    doc: JsonDoc,
    tools: OwnedTools,
) -> Delivered:
    started = time.perf_counter()
    ops = TOOLING[adapter.name]
    owned = {s.name for s in tools.specs}

    async def work(send: Send, result: Delivered) -> None:
        splice = splice_for(adapter.name, owned)
        current = doc
        begun = False
        for round_no in range(MAX_ROUNDS + 1):
            if round_no == MAX_ROUNDS:
                ops.forbid_tools(current)
            result.sent = current.to_bytes()
            if begun:
                resp = await _continue(upstream, url, headers, result.sent, result)
            else:
                resp = await open_upstream(
                    upstream, send, "POST", url, headers, result.sent, adapter.error_body, result
                )
            if resp is None:
                return
            async with resp:
                streamed = resp.headers.get("content-type", "").startswith("text/event-stream")
                if resp.status >= 400 or not streamed:
                    if not begun:  # nothing sent yet: the provider's answer as it is
                        buf = await read_whole(resp)
                        result.status, result.streamed, result.chunks = (
                            buf.status,
                            False,
                            buf.chunks,
                        )
                        result.kind = "upstream_error" if buf.status >= 400 else result.kind
                        await replay_whole(send, buf)
                    else:
                        result.kind, result.error = "cut", f"continuation answered {resp.status}"
                    return
                if not begun:
                    result.status, result.streamed = resp.status, True
                    result.ttfb_ms = (time.perf_counter() - started) * 1000
                    start = {"type": "http.response.start", "status": resp.status}
                    await send({**start, "headers": response_headers(resp.headers.items())})
                    begun = True
                chunks = await _pass(resp, send, splice, result)
                if chunks is None:
                    return
            answer = assemble(adapter, chunks, True)
            whole = answer is not None and answer.complete and answer.error is None
            calls = [b for b in answer.tool_calls if b.name in owned] if answer and whole else []
            result.chunks = chunks
            if not splice.tripped or not calls:
                held = splice.release()  # a failed or cut round: the client gets its ending
                if held:
                    await send({"type": "http.response.body", "body": held, "more_body": True})
                break
            add_hidden_usage(result, answer)  # type: ignore[arg-type]
            outcomes = await run_calls(tools, calls)
            current = JsonDoc(current.to_bytes())
            ops.continue_with(current, answer, owned, outcomes)  # type: ignore[arg-type]
            splice.next_round()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return await watched(receive, send, work)


async def _continue(
    upstream: Upstream, url: str, headers: list[tuple[str, str]], body: bytes, result: Delivered
) -> aiohttp.ClientResponse | None:
    """A hidden round's request; None (the stream left unfinished) when it cannot be sent."""
    try:
        return await upstream.send("POST", url, headers, body)
    except Exception as exc:
        result.kind, result.error = "cut", f"continuation failed: {exc}"
        return None


async def _pass(
    resp: aiohttp.ClientResponse, send: Send, splice: Splice, result: Delivered
) -> list[bytes] | None:
    """One round's events through the splice to the client; the round's raw chunks, or None
    when the provider cut it (the client's stream is left unfinished)."""
    events = RawEvents()
    chunks: list[bytes] = []
    try:
        async for chunk in resp.content.iter_any():
            chunks.append(chunk)
            out = b"".join(
                b for raw, ev in events.feed(chunk) if (b := splice.event(ev.event, ev.data, raw))
            )
            if out:
                await send({"type": "http.response.body", "body": out, "more_body": True})
    except STREAM_ERRORS as exc:
        result.kind, result.error = "cut", f"provider cut the stream: {exc!r}"
        result.chunks = chunks
        return None
    tail = b"".join(b for raw, ev in events.close() if (b := splice.event(ev.event, ev.data, raw)))
    if tail:
        await send({"type": "http.response.body", "body": tail, "more_body": True})
    return chunks
