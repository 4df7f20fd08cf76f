"""Answering with tools ember executes itself, invisibly to the client.

When a stage gives an exchange ``owned_tools`` (and has offered their definitions in the
request), the answer is buffered instead of streamed: if the model called an owned tool, ember
runs it, appends the call and its result to the conversation and asks upstream again, up to
``MAX_ROUNDS`` times (the last round forbids tools, so a model that keeps calling cannot loop
forever). Only the final answer — one without owned calls — reaches the client, replayed exactly
as the provider sent it (SSE events and all), so the client never sees a tool it did not define.

A JSON answer is read whole before anything reaches the client (it is sent whole anyway); a
streamed one streams, with the owned calls held back and their continuation spliced in
(``owned_stream``). Usage of the hidden rounds is accounted with the exchange, because the
provider bills them.
"""

from __future__ import annotations

import time

from ember.exchange import OwnedTools
from ember.protocols.assemble import assemble
from ember.protocols.base import ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.protocols.tooling import TOOLING
from ember.proxy.delivery import Delivered
from ember.proxy.owned_rounds import (
    MAX_ROUNDS,
    Buffered,
    add_hidden_usage,
    read_whole,
    replay_whole,
    run_calls,
)
from ember.proxy.owned_stream import relay_spliced
from ember.proxy.relay import STREAM_ERRORS, Receive, Send, answer_cut, open_upstream, watched
from ember.proxy.upstream import Upstream

__all__ = ["MAX_ROUNDS", "relay_owned"]


async def relay_owned(
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
    """A streamed request streams (``ember.proxy.owned_stream``: owned calls held back,
    their continuation spliced in); a JSON one is read whole, as it is sent whole anyway."""
    if adapter.is_stream(doc.value):
        return await relay_spliced(
            upstream, receive, send, adapter=adapter, url=url, headers=headers, doc=doc, tools=tools
        )
    started = time.perf_counter()
    ops = TOOLING[adapter.name]
    owned = {s.name for s in tools.specs}

    async def work(send: Send, result: Delivered) -> None:
        current = doc
        for round_no in range(MAX_ROUNDS + 1):
            if round_no == MAX_ROUNDS:
                ops.forbid_tools(current)
            result.sent = current.to_bytes()
            resp = await open_upstream(
                upstream, send, "POST", url, headers, result.sent, adapter.error_body, result
            )
            if resp is None:
                return
            async with resp:
                try:
                    buf = await read_whole(resp)
                except STREAM_ERRORS as exc:  # nothing reached the client yet: a plain 502
                    await answer_cut(send, result, adapter.error_body, exc)
                    return
            result.ttfb_ms = result.ttfb_ms or (time.perf_counter() - started) * 1000
            answer = assemble(adapter, buf.chunks, buf.streamed)
            # A failed or unfinished answer goes to the client as it is: its tool calls may be
            # half-written, and running them would act on input the model never finished.
            whole = answer is not None and answer.complete and answer.error is None
            calls = [b for b in answer.tool_calls if b.name in owned] if answer and whole else []
            if buf.status >= 400 or answer is None or not calls or round_no == MAX_ROUNDS:
                await _finish(send, buf, result)
                return
            add_hidden_usage(result, answer)
            outcomes = await run_calls(tools, calls)
            current = JsonDoc(current.to_bytes())
            ops.continue_with(current, answer, owned, outcomes)

    return await watched(receive, send, work)


async def _finish(send: Send, buf: Buffered, result: Delivered) -> None:
    result.status = buf.status
    result.streamed = buf.streamed
    result.chunks = buf.chunks
    if buf.status >= 400:
        result.kind = "upstream_error"
    await replay_whole(send, buf)
