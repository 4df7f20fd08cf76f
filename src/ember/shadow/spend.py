"""Reading a project's spend over the budget window from its accounting rows (SQL only).

One query over ``exchanges`` (an index on ``ts`` keeps it to the window): the clients' own
calls, and ember's extraction calls (``shadow`` and ``steward``), each in dollars — NULL as
soon as one call has no price, never a smaller number — and in weighted tokens
(``budget.WEIGHTS``).
"""

from __future__ import annotations

import time

from ember.shadow.budget import WEIGHTS, WINDOW_SECONDS, Spend, Weights
from ember.store.driver import Connection

#: The origins whose calls the shadow budget pays for.
EXTRACTION = ("shadow", "steward")


def _weighted_sql() -> str:
    def expr(w: Weights) -> str:
        return (
            f"input_tokens + cache_read_tokens * {w.cache_read} + "
            f"(cache_write_tokens - cache_write_1h_tokens) * {w.cache_write} + "
            f"cache_write_1h_tokens * {w.cache_write_1h} + output_tokens * {w.output}"
        )

    return (
        f"CASE WHEN protocol = 'anthropic' THEN {expr(WEIGHTS['anthropic'])} "
        f"ELSE {expr(WEIGHTS['openai'])} END"
    )


_WINDOW = f"""
SELECT origin IN {EXTRACTION!r} AS extraction,
       CASE WHEN COUNT(cost_usd) = COUNT(*) THEN SUM(cost_usd) END,
       SUM({_weighted_sql()})
FROM exchanges
WHERE ts >= ? AND origin IN ('client', {", ".join(repr(o) for o in EXTRACTION)})
GROUP BY extraction
"""


def window(conn: Connection, now: float | None = None) -> tuple[Spend, Spend]:
    """(the clients' spend, the extraction spend) over the last ``WINDOW_SECONDS``."""
    since = (time.time() if now is None else now) - WINDOW_SECONDS
    found = {
        bool(extraction): Spend(None if usd is None else float(usd), float(tokens or 0.0))
        for extraction, usd, tokens in conn.execute(_WINDOW, (since,))
    }
    nothing = Spend(0.0, 0.0)
    return found.get(False, nothing), found.get(True, nothing)
