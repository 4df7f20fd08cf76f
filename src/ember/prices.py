"""Model prices and the cost of one exchange (pure).

Prices are USD per million tokens. A model that is not in the table has no price, and its cost
is ``None`` — never 0 and never a neighbour's price: a report that shows $0.00 for an unpriced
model understates what the user paid. Lookup is by exact name, then with a trailing date
(``-20250929``, ``-2025-08-07``) removed; there is deliberately no prefix matching, because
``gpt-5-pro`` costs ten times ``gpt-5``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ember.protocols.base import Usage

#: When the built-in table was copied from the providers' public price lists (the default
#: models of Claude Code 2.1.197 and Codex CLI 0.171.0 were added on 2026-12-04).
BUILTIN_SNAPSHOT = "builtin-2026-12"

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")


def _anthropic(inp: float, out: float) -> Price:
    # Anthropic: cache read 0.1x, write 1.25x (5 min) or 2x (1 h) of the base input price.
    return Price(inp, out, round(inp * 0.1, 6), round(inp * 1.25, 6), round(inp * 2, 6))


BUILTIN_PRICES: dict[str, Price] = {
    # Claude Code 2.1.197's default model for an API key (no --model).
    "claude-opus-4-8": _anthropic(5.0, 25.0),
    "claude-opus-4-6": _anthropic(5.0, 25.0),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-6": _anthropic(3.0, 15.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    # Codex CLI 0.171.0's default model. The GPT-6 family bills cache writes (1.25x input) and
    # reads (0.05x here); requests over 272k input tokens cost more, which this table does not
    # model (Codex's prompts are far below it).
    "gpt-6.2-sol": Price(2.0, 10.0, 0.10, 2.5, 2.5),
    # OpenAI: cached input at the listed cached price, no separate write price.
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5.1": Price(1.25, 10.0, 0.125),
    "gpt-5-codex": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.4, 0.005),
    # OpenCode 1.18.33's small model on its openai provider: the title of every session.
    "gpt-5.4-nano": Price(0.20, 1.25, 0.02),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    # Google, from ai.google.dev/gemini-api/docs/pricing (Standard tier, text input): the
    # "context caching" price is what an implicit cache read costs; there is no write price.
    # The Pro models cost more for prompts over 200k tokens, which this table does not model.
    # Gemini CLI 0.61.0 with its default auto model: gemini-3.8-flash for the turn, whose price
    # doubles on 2027-01-01 ($1.50 / $7.50), and gemini-3.5-flash-lite for its router. The 3.x
    # models read their cache at a tenth of the input price.
    "gemini-3.8-flash": Price(0.75, 3.75, 0.075),
    "gemini-3.5-flash": Price(1.50, 9.0, 0.15),
    "gemini-3.5-flash-lite": Price(0.30, 2.50, 0.03),
    "gemini-3.1-pro-preview": Price(2.0, 12.0, 0.20),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-3-pro-preview": Price(2.0, 12.0, 0.20),
    "gemini-3-flash-preview": Price(0.50, 3.0, 0.05),
}


class PriceTable:
    """The built-in prices overlaid with the user's ``[prices]`` config section."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self.prices = {**BUILTIN_PRICES, **(overrides or {})}
        if overrides:
            digest = hashlib.sha256(
                json.dumps({k: asdict(v) for k, v in sorted(overrides.items())}).encode()
            ).hexdigest()[:12]
            self.snapshot = f"{BUILTIN_SNAPSHOT}+config-{digest}"
        else:
            self.snapshot = BUILTIN_SNAPSHOT

    def lookup(self, model: str | None) -> Price | None:
        if not model:
            return None
        if model in self.prices:
            return self.prices[model]
        return self.prices.get(_DATE_SUFFIX.sub("", model))

    def cost(self, model: str | None, usage: Usage | None) -> float | None:
        """USD for one exchange, or None when the model or the usage is unknown."""
        price = self.lookup(model)
        if price is None or usage is None:
            return None
        write_1h = usage.cache_write_1h_tokens
        write_5m = usage.cache_write_tokens - write_1h
        w5 = price.cache_write_5m if price.cache_write_5m is not None else price.input
        w1 = price.cache_write_1h if price.cache_write_1h is not None else w5
        total = (
            usage.input_tokens * price.input
            + usage.cache_read_tokens * price.cache_read
            + write_5m * w5
            + write_1h * w1
            + usage.output_tokens * price.output
        )
        return total / 1_000_000
