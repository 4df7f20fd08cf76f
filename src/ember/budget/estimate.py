"""How much a request may cost before it is answered: its reservation (pure).

The input is every string of the request at about four bytes a token (``usage_estimate``),
and ``ADDED_TOKENS`` more for what ember's later stages may add to it (the budget runs first,
before memory's block and shaping's are in), all of it priced as fresh input: what the
provider reads from its cache costs a tenth of that, so the input part is an upper bound for
everything but a cache write (1.25x). The output is
the request's own cap (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``) at
the model's output price, but no more than ``OUTPUT_TOKENS``: agents ask for 32k tokens on
every turn and mostly write a few hundred, and a reservation of a full 32k on each request in
flight refused requests while most of the limit was left. A request that writes more than
that passes its reservation, by the output it wrote past it; ``budget_reserve_usd`` sets a
fixed reservation instead. An unpriced model reserves nothing: its calls count nothing
against a limit either (spend is in dollars at the prices ember knows).
"""

from __future__ import annotations

from typing import Any

from ember.prices import PriceTable
from ember.protocols.base import AssembledMessage, Usage
from ember.usage_estimate import estimate_usage

#: Output tokens a request is reserved for at most (when it caps its output lower, its cap).
OUTPUT_TOKENS = 4096
#: Input tokens ember's own stages may add after the budget checked the request: memory's
#: block (``memory_budget_tokens``, 1024 by default) and shaping's verbosity block.
ADDED_TOKENS = 1280
#: Where the wire formats put a request's output cap (Messages, Chat, Responses).
_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def output_cap(body: Any) -> int | None:
    """The request's own cap on its output tokens, when it sets one."""
    if not isinstance(body, dict):
        return None
    for key in _CAPS:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def reservation_usd(
    body: Any, model: str | None, prices: PriceTable, fixed: float | None = None
) -> float:
    """What to hold for one request, in dollars: ``fixed`` when the user set one."""
    if fixed is not None:
        return fixed
    if prices.lookup(model) is None:
        return 0.0
    cap = output_cap(body)
    output = OUTPUT_TOKENS if cap is None else min(cap, OUTPUT_TOKENS)
    fresh = estimate_usage(body, AssembledMessage(protocol="")).input_tokens + ADDED_TOKENS
    return prices.cost(model, Usage(input_tokens=fresh, output_tokens=output)) or 0.0
