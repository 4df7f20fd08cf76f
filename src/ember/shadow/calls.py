"""One upstream call ember makes on its own behalf, accounted with its origin.

Every such call — a hot shadow turn, a cold page, a steward page — is charged by its real
usage at the price snapshot in force (unknown price: ``None``, never a smaller number), gets an
accounting row of its own (``origin`` ``shadow`` or ``steward``: never folded into the user's
session totals), and fails as a value, not an exception, so a run can record what it cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ember.errors import UpstreamError
from ember.exchange import UpstreamClient
from ember.prices import PriceTable
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter
from ember.shadow.models import CallUsage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database


@dataclass
class CallResult:
    status: int
    answer: AssembledMessage | None
    usage: CallUsage
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status < 400 and self.answer is not None and self.answer.error is None


async def call(
    upstream: UpstreamClient,
    adapter: ProtocolAdapter,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    model: str | None,
    prices: PriceTable,
) -> CallResult:
    """POST ``body`` and assemble the answer (streamed or not, as the body asked)."""
    try:
        async with upstream.call("POST", url, _json(headers), body) as reply:
            chunks = [c async for c in reply.chunks]
            streamed = any(
                k.lower() == "content-type" and v.startswith("text/event-stream")
                for k, v in reply.headers
            )
            status = reply.status
    except UpstreamError as exc:
        return CallResult(502, None, CallUsage(model), str(exc))
    answer = assemble(adapter, chunks, streamed)
    usage = answer.usage if answer is not None else None
    used = CallUsage(
        (answer.model if answer is not None and answer.model else None) or model,
        usage.input_tokens if usage else 0,
        usage.cache_read_tokens if usage else 0,
        usage.cache_write_tokens if usage else 0,
        usage.output_tokens if usage else 0,
        prices.cost((answer.model if answer else None) or model, usage),
    )
    error = None
    if status >= 400:
        error = f"the provider answered {status}"
    elif answer is None or answer.error is not None:
        error = answer.error.message if answer is not None and answer.error else "no answer"
    return CallResult(status, answer, used, error)


def _json(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    kept = [(k, v) for k, v in headers if k.lower() != "content-type"]
    return [*kept, ("content-type", "application/json")]


def account(
    db: Database,
    result: CallResult,
    *,
    session_id: str,
    project: str | None,
    protocol: str,
    origin: str,
    started: float,
    prices: PriceTable,
) -> None:
    """The call's accounting row (queued on the project's writer, never awaited)."""
    answer = result.answer
    record = ExchangeRecord(
        ts=time.time(),
        session_id=session_id,
        project=project,
        protocol=protocol,
        model=result.usage.model,
        status=result.status,
        outcome="ok" if result.ok else "upstream_error",
        stream=False,
        usage=answer.usage if answer is not None else None,
        cost_usd=result.usage.usd,
        price_snapshot=prices.snapshot,
        latency_ms=(time.perf_counter() - started) * 1000,
        ttfb_ms=None,
        thread=f"{session_id}/{origin}",
        thread_kind=origin,
        origin=origin,
        error_type=answer.error.type if answer is not None and answer.error else None,
    )
    db.submit(record.insert, label=f"accounting:{origin}")
