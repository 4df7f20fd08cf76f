"""One upstream call ember makes on its own behalf, accounted with its origin.

Every such call — a hot shadow turn, a cold page, a steward page — is charged by its real
usage at the price snapshot in force (unknown price: ``None``, never a smaller number), gets an
accounting row of its own (``origin`` ``shadow`` or ``steward``: never folded into the user's
session totals), and fails as a value, not an exception, so a run can record what it cost.

A call cancelled after it went out (a user message, a stopping proxy) was still asked of the
provider, which bills it: it raises ``CallCut``, a ``CancelledError`` that carries what the
call cost — the usage the stream reported before the cut (Anthropic's ``message_start`` holds
the input counters), else an estimate from the request's bytes (``ember.usage_estimate``,
marked estimated). Without it such a run was recorded at $0 and its spend never reached the
budget.

A call that ends without usage is costed all the same: a whole answer without it (an OpenAI
Chat stream from a server that ignores ``stream_options.include_usage``) is estimated and
marked so; a call the provider refused with an error status, or never answered, billed
nothing and costs $0 at a known price. An unknown cost on a priced model made the budget
count the whole week in weighted tokens, "because a model has no price".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

import orjson

from ember.errors import UpstreamError
from ember.exchange import UpstreamClient
from ember.prices import PriceTable
from ember.protocols.assemble import assemble
from ember.protocols.base import AssembledMessage, ProtocolAdapter, Usage
from ember.shadow.models import CallUsage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.usage_estimate import answer_tokens, estimate_usage

#: The status of a call cancelled before the provider's status line arrived (nginx's "client
#: closed request"; no provider sends it).
CUT_STATUS = 499


@dataclass
class CallResult:
    status: int
    answer: AssembledMessage | None
    usage: CallUsage
    error: str | None = None
    #: the token counts the accounting row gets: the answer's, or what was known of a call cut
    #: short (None: the answer's own usage, if any)
    tokens: Usage | None = None
    #: ``tokens`` is ember's estimate, not the provider's counters
    estimated: bool = False
    #: cancelled after it went out (``CallCut``)
    cut: bool = False

    @property
    def ok(self) -> bool:
        return (
            not self.cut
            and self.status < 400
            and self.answer is not None
            and self.answer.error is None
        )


class CallCut(asyncio.CancelledError):
    """The call was cancelled after it went out; ``result`` is what it cost (``cut``)."""

    def __init__(self, result: CallResult) -> None:
        super().__init__("the call was cancelled after it was sent")
        self.result = result


async def call(
    upstream: UpstreamClient,
    adapter: ProtocolAdapter,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    model: str | None,
    prices: PriceTable,
    *,
    guess: Usage | None = None,
) -> CallResult:
    """POST ``body`` and assemble the answer (streamed or not, as the body asked). Cancelled
    once sent, it raises ``CallCut``. ``guess``: the usage to record for a call cut before
    the provider reported any (a hot fork knows its prefix is read from the cache); None:
    the request's size as ``usage_estimate`` counts it, all fresh input."""
    chunks: list[bytes] = []
    streamed = False
    status: int | None = None
    try:
        async with upstream.call("POST", url, _json(headers), body) as reply:
            status = reply.status
            streamed = any(
                k.lower() == "content-type" and v.startswith("text/event-stream")
                for k, v in reply.headers
            )
            async for chunk in reply.chunks:
                chunks.append(chunk)
    except UpstreamError as exc:
        if status is None:  # never answered: nothing was billed
            return CallResult(502, None, _used(None, model, prices, refused=True), str(exc))
        # the answer broke off: billed all the same, and failed
        cut = _cut(adapter, body, chunks, streamed, model, prices, status, str(exc), guess)
        return replace(cut, status=502)
    except asyncio.CancelledError as exc:
        result = _cut(adapter, body, chunks, streamed, model, prices, status, "cancelled", guess)
        result.cut = True
        raise CallCut(result) from exc
    answer = assemble(adapter, chunks, streamed)
    error = None
    if status >= 400:
        error = f"the provider answered {status}"
    elif answer is None or answer.error is not None:
        error = answer.error.message if answer is not None and answer.error else "no answer"
    if error is None and answer is not None and answer.usage is None and answer.complete:
        # a whole answer without usage (a server that ignores stream_options.include_usage)
        tokens = _estimate(body, answer, adapter, guess)
        used = _used(answer, model, prices, tokens)
        return CallResult(status, answer, used, None, tokens=tokens, estimated=True)
    return CallResult(status, answer, _used(answer, model, prices, refused=status >= 400), error)


def _used(
    answer: AssembledMessage | None,
    model: str | None,
    prices: PriceTable,
    usage: Usage | None = None,
    *,
    refused: bool = False,
) -> CallUsage:
    """The call's counters and cost. ``refused``: the provider answered an error status or
    was never reached, so without usage it billed nothing: $0 at a known price, where an
    unknown cost would count the whole budget window in weighted tokens for a week."""
    usage = usage if usage is not None else (answer.usage if answer is not None else None)
    named = (answer.model if answer is not None and answer.model else None) or model
    cost = prices.cost(named, usage)
    if cost is None and usage is None and refused and prices.lookup(named) is not None:
        cost = 0.0
    return CallUsage(
        named,
        usage.input_tokens if usage else 0,
        usage.cache_read_tokens if usage else 0,
        usage.cache_write_tokens if usage else 0,
        usage.output_tokens if usage else 0,
        cost,
    )


def _cut(
    adapter: ProtocolAdapter,
    body: bytes,
    chunks: list[bytes],
    streamed: bool,
    model: str | None,
    prices: PriceTable,
    status: int | None,
    error: str,
    guess: Usage | None,
) -> CallResult:
    """What a call that went out but did not finish cost: the usage its answer reported so far
    (input counters come first on every stream), else an estimate from the request."""
    answer = assemble(adapter, chunks, streamed) if chunks else None
    seen = answer.usage if answer is not None else None
    tokens: Usage | None
    if (status is not None and status >= 400) or (seen is not None and _counted(seen)):
        tokens, estimated = seen, False  # an error is not billed; counters seen are the truth
    else:
        tokens, estimated = _estimate(body, answer, adapter, guess), True
    used = _used(answer, model, prices, tokens, refused=status is not None and status >= 400)
    return CallResult(status or CUT_STATUS, answer, used, error, tokens=tokens, estimated=estimated)


def _counted(usage: Usage) -> bool:
    return bool(usage.input_tokens or usage.cache_read_tokens or usage.cache_write_tokens)


def _estimate(
    body: bytes, answer: AssembledMessage | None, adapter: ProtocolAdapter, guess: Usage | None
) -> Usage:
    """``guess``, else the request's tokens as ``usage_estimate`` counts them; output is what
    the answer showed before the cut."""
    shown = answer if answer is not None else AssembledMessage(adapter.name)
    if guess is not None:
        return replace(guess, output_tokens=max(guess.output_tokens, answer_tokens(shown)))
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        request = body.decode("utf-8", errors="replace")
    return estimate_usage(request, shown)


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
    outcome = "cancelled" if result.cut else "ok" if result.ok else "upstream_error"
    record = ExchangeRecord(
        ts=time.time(),
        session_id=session_id,
        project=project,
        protocol=protocol,
        model=result.usage.model,
        status=result.status,
        outcome=outcome,
        stream=False,
        usage=result.tokens or (answer.usage if answer is not None else None),
        cost_usd=result.usage.usd,
        price_snapshot=prices.snapshot,
        latency_ms=(time.perf_counter() - started) * 1000,
        ttfb_ms=None,
        thread=f"{session_id}/{origin}",
        thread_kind=origin,
        origin=origin,
        error_type=answer.error.type if answer is not None and answer.error else None,
        usage_estimated=result.estimated,
    )
    db.submit(record.insert, label=f"accounting:{origin}")
