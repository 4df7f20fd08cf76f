"""What a shadow run will cost and whether it may go hot: pure decisions over what is known.

A hot run forks the session's recorded last request: the provider reads that prefix from its
cache and only the answer it appends and the question are fresh input. A cold run has no such
prefix: the light model reads the rendered backlog in pages. The estimates here are what the
spend cap is checked against before any call is made (``spend_share.Budget.refusal``), so an
estimate that undercounts lets a run past the cap; they price the same parts a call is billed
for (cache read, fresh input, expected output).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ember.prices import Price, PriceTable
from ember.protocols.forking import answer_refusal, fork_eligibility
from ember.shadow import question
from ember.shadow.models import RunPath
from ember.shadow.prefix import Prefix
from ember.shadow.spend_share import EXPECTED_OUTPUT_TOKENS, Spend, weighted_tokens
from ember.store.transcript_rows import Message
from ember.tokens import count_tokens

#: The light model when none is configured, by the session's provider.
DEFAULT_LIGHT = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-5-mini",
    "gemini": "gemini-2.5-flash-lite",
}
#: Input a cold page's prompt adds to its rendered messages (instructions, framing).
COLD_PAGE_OVERHEAD = 800


@dataclass
class Plan:
    """How one run reads the backlog, with what, and at what estimated cost."""

    path: RunPath
    model: str | None
    messages: list[Message]
    from_seq: int
    estimate: Spend
    prefix: Prefix | None = None
    credentials: list[tuple[str, str]] | None = None
    protocol: str = "anthropic"
    skip: str | None = None
    #: what the question shows as already remembered (a new fact may supersede one)
    known: list[question.Remembered] = field(default_factory=list)


def request_body(sent: bytes) -> Any:
    """The recorded request as JSON, or None when it is not JSON."""
    try:
        return orjson.loads(sent)
    except orjson.JSONDecodeError:
        return None


def model_of(prefix: Prefix) -> str | None:
    """The model the session's last request asked for: the hot run asks the same one, or
    the cache it would read is another model's (none)."""
    return prefix.adapter.model(request_body(prefix.sent))


def hot_refusal(prefix: Prefix) -> str | None:
    """Why the recorded request cannot be forked (its shape, or an answer that cannot be
    sent back as it came), or None."""
    body = request_body(prefix.sent)
    return fork_eligibility(prefix.adapter, body) or answer_refusal(
        prefix.adapter, body, prefix.answer
    )


def hot_fresh_tokens(ask: str, prefix: Prefix) -> int:
    """The fresh input of a fork: the question and the answer it appends."""
    return count_tokens(ask) + count_tokens(prefix.answer.text)


def hot_estimate(
    prefix: Prefix, messages: list[Message], known: list[question.Remembered], prices: PriceTable
) -> Spend:
    """A fork reads the recorded request from the cache; the answer it appends and the
    question are fresh input."""
    ask = question.hot_question(messages, prefix.session_id, prefix.propose_tool, known)
    fresh = hot_fresh_tokens(ask, prefix)
    tokens = weighted_tokens(
        prefix.adapter.name, fresh, cache_read=prefix.input_tokens, output=EXPECTED_OUTPUT_TOKENS
    )
    price = prices.lookup(model_of(prefix))
    if price is None:
        return Spend(None, tokens)
    usd = (
        prefix.input_tokens * price.cache_read
        + fresh * price.input
        + EXPECTED_OUTPUT_TOKENS * price.output
    ) / 1e6
    return Spend(usd, tokens)


def cold_estimate(
    messages: list[Message], page_tokens: int, protocol: str, price: Price | None
) -> Spend:
    """Every page of the backlog is fresh input, each with its expected answer."""
    pages = question.cold_pages(messages, page_tokens)
    fresh = sum(count_tokens("\n".join(p)) + COLD_PAGE_OVERHEAD for p in pages)
    output = len(pages) * EXPECTED_OUTPUT_TOKENS
    usd = None if price is None else (fresh * price.input + output * price.output) / 1e6
    return Spend(usd, weighted_tokens(protocol, fresh, output=output))
