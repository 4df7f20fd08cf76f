"""What the two relays of owned tools share (``owned`` for a JSON answer, ``owned_stream``
for a streamed one): the bound on hidden rounds, reading and replaying an answer whole,
running the owned calls, and accounting each hidden round's usage."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import aiohttp

from ember.exchange import HiddenRound, OwnedTools
from ember.protocols.base import AssembledMessage
from ember.protocols.tooling import ToolOutcome, parse_arguments
from ember.proxy.delivery import Delivered
from ember.proxy.relay import Send
from ember.proxy.upstream import response_headers

log = logging.getLogger(__name__)

#: Hidden rounds at most; the last one forbids tools, so a model that keeps calling cannot
#: loop forever.
MAX_ROUNDS = 4


@dataclass
class Buffered:
    status: int
    headers: list[tuple[bytes, bytes]]
    chunks: list[bytes]
    streamed: bool


async def read_whole(resp: aiohttp.ClientResponse) -> Buffered:
    streamed = resp.headers.get("content-type", "").startswith("text/event-stream")
    chunks = [c async for c in resp.content.iter_any()] if streamed else [await resp.read()]
    return Buffered(resp.status, response_headers(resp.headers.items()), chunks, streamed)


async def replay_whole(send: Send, buf: Buffered) -> None:
    headers = list(buf.headers)
    if not buf.streamed:
        headers.append((b"content-length", str(sum(map(len, buf.chunks))).encode()))
    await send({"type": "http.response.start", "status": buf.status, "headers": headers})
    for chunk in buf.chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def run_calls(tools: OwnedTools, calls: list[Any]) -> list[ToolOutcome]:
    outcomes = []
    for call in calls:
        try:
            content, is_error = await tools.call(call.name, parse_arguments(call.input))
        except Exception as exc:  # a tool must not break the user's request
            log.exception("owned tool %s failed", call.name)
            content, is_error = f"tool failed: {exc}", True
        outcomes.append(ToolOutcome(call, content, is_error))
    return outcomes


def add_hidden_usage(result: Delivered, answer: AssembledMessage) -> None:
    result.hidden.append(HiddenRound(answer.model, answer.usage))
