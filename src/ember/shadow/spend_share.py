"""What shadow memory may spend: a share of what the project's clients spend (pure).

Measured in real use, a per-session cap does not work: a hot read of a prefix costs about 0.1x
of what writing it cost, so one run after a one-request session is ~8-12% of that session, and
a cap near 10% vetoed every short session by construction (real Claude Code and Codex with
shipped defaults stored 0 of 6 stated facts). So the budget belongs to the project:

- over a rolling window (``WINDOW_SECONDS``, 7 days), ember's own extraction calls (origins
  ``shadow`` and ``steward``) may spend ``share`` of what the project's clients spent in the
  same window, plus an ``allowance``, so a new project's first sessions are read before its
  spend has built up a share;
- a run that would pass the budget is skipped with the reason, and its messages stay unread:
  a later run (a later turn, a later session, the next credentials the project sees) reads
  them once the budget allows — a skip defers, it never drops a backlog;
- the unit is US dollars when every call in the window and the run about to go have a price;
  ember's own calls always do when their model does (``calls``: an answer without usage is
  estimated, a refused call is $0). Otherwise (a model without a built-in price, like a
  client's newest default, or a client's call that broke off before reporting usage) it is
  *weighted tokens*: each token counted at what the provider charges for it relative to fresh
  input (``WEIGHTS``), so a cache read counts a tenth of a fresh token, as it is billed. A model
  without a price never blocks the shadow, and never makes a run look free either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ember.protocols import ANTHROPIC, BY_NAME, OPENAI_CHAT

WINDOW_SECONDS = 7 * 86_400.0
#: Output a shadow answer is expected to take, for a run's estimate before it goes.
EXPECTED_OUTPUT_TOKENS = 250

Unit = Literal["usd", "tokens"]


@dataclass(frozen=True)
class Weights:
    """Tokens of each kind, as multiples of a fresh input token's price."""

    cache_read: float
    cache_write: float
    cache_write_1h: float
    output: float


#: By wire family: Anthropic bills a cache read 0.1x, a write 1.25x (2x for the 1-hour TTL)
#: and output 5x fresh input (Haiku, Sonnet and Opus alike); OpenAI's GPT-5 family bills a
#: cached token 0.1x, no write premium, and output 8x.
WEIGHTS: dict[str, Weights] = {
    "anthropic": Weights(cache_read=0.1, cache_write=1.25, cache_write_1h=2.0, output=5.0),
    "openai": Weights(cache_read=0.1, cache_write=1.0, cache_write_1h=1.0, output=8.0),
}


def family(protocol: str | None) -> str:
    """The ``WEIGHTS`` of a wire format name (``openai_chat``...): its provider's
    (``ProtocolAdapter.family``; none named: Anthropic's), else OpenAI's."""
    adapter = BY_NAME.get(protocol, OPENAI_CHAT) if protocol else ANTHROPIC
    return adapter.family if adapter.family in WEIGHTS else OPENAI_CHAT.family


def weighted_tokens(
    protocol: str | None,
    input_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    output: int = 0,
    cache_write_1h: int = 0,
) -> float:
    """One call's tokens in fresh-input equivalents (``cache_write`` includes the 1-hour
    writes, as the providers' usage reports them)."""
    w = WEIGHTS[family(protocol)]
    return (
        input_tokens
        + cache_read * w.cache_read
        + (cache_write - cache_write_1h) * w.cache_write
        + cache_write_1h * w.cache_write_1h
        + output * w.output
    )


@dataclass(frozen=True)
class Spend:
    """Spend in both units: ``usd`` is None as soon as one call in it has no price."""

    usd: float | None
    tokens: float

    def __add__(self, other: Spend) -> Spend:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return Spend(usd, self.tokens + other.tokens)


NOTHING = Spend(0.0, 0.0)


@dataclass(frozen=True)
class Budget:
    """The project's window: what its clients spent, what ember's extraction spent."""

    client: Spend
    shadow: Spend
    share: float
    #: the allowance in weighted tokens, and in dollars at the run's model's input price
    #: (None: that model has no price)
    allowance_tokens: float
    allowance_usd: float | None = None

    def unit(self, estimate: Spend) -> Unit:
        priced = (self.client.usd, self.shadow.usd, estimate.usd, self.allowance_usd)
        return "usd" if all(v is not None for v in priced) else "tokens"

    def limit(self, unit: Unit) -> float:
        if unit == "usd":
            return (self.client.usd or 0.0) * self.share + (self.allowance_usd or 0.0)
        return self.client.tokens * self.share + self.allowance_tokens

    def spent(self, unit: Unit) -> float:
        return (self.shadow.usd or 0.0) if unit == "usd" else self.shadow.tokens

    def left(self, unit: Unit) -> float:
        return self.limit(unit) - self.spent(unit)

    def refusal(self, estimate: Spend) -> str | None:
        """Why a run costing about ``estimate`` must wait (None: it fits)."""
        unit = self.unit(estimate)
        cost = estimate.usd if unit == "usd" else estimate.tokens
        if self.spent(unit) + (cost or 0.0) <= self.limit(unit):
            return None
        return (
            f"budget: this run (~{fmt(cost or 0.0, unit)}) would take the project's shadow "
            f"spend past {fmt(self.limit(unit), unit)} ({self.share:.0%} of its clients' "
            f"{fmt(self.client.usd if unit == 'usd' else self.client.tokens, unit)} over 7 "
            f"days + {fmt(self.allowance_usd if unit == 'usd' else self.allowance_tokens, unit)}"
            f" allowance; {fmt(self.spent(unit), unit)} spent){_why_tokens(unit)}; its messages "
            "stay unread for a later run"
        )


def fmt(value: float | None, unit: Unit) -> str:
    if value is None:
        return "?"
    if unit == "usd":
        return f"${value:.4f}"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M tokens"
    return f"{value / 1000:.1f}k tokens" if value >= 1000 else f"{value:.0f} tokens"


def _why_tokens(unit: Unit) -> str:
    if unit == "usd":
        return ""
    return (
        " [counted in weighted tokens: a call in the window or this run has no dollar cost "
        "(its model has no price, or it broke off before reporting usage)]"
    )
