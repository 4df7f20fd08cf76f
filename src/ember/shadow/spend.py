"""Reading a project's spend over the budget window from its accounting rows (SQL only).

One query over the hourly sums (``spend_hours``) and the rows of the window's first hour: the
clients' own calls, and ember's extraction calls (``shadow`` and ``steward``), each in dollars —
NULL as soon as one call has no price, never a smaller number — and in weighted tokens
(``spend_share.WEIGHTS``).
"""

from __future__ import annotations

import time
from typing import Any

from ember.prices import PriceTable
from ember.shadow.spend_share import NOTHING, WEIGHTS, WINDOW_SECONDS, Budget, Spend, Weights, fmt
from ember.store.driver import Connection
from ember.store.sql import dialect, truncated

#: The origins whose calls the shadow budget pays for (also named by the trigger that keeps
#: ``spend_hours``: a change here needs a migration there).
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


#: The window's first, partial hour from the rows (at most an hour of them, by the ``ts``
#: index), every later hour from ``spend_hours`` (migration ``0008_spend_hours``: at most
#: 169 x 2 x 2 rows however busy the week was). A row belongs to the hour its trigger put it
#: in: ``CAST(ts / 3600 AS INTEGER)`` on SQLite (it truncates), ``floor`` then the cast on
#: PostgreSQL (its CAST rounds: half the rows of an hour would be counted in the next), the
#: very expression of each backend's trigger, so no row counts twice or is left out.
#: ``extraction`` and ``priced`` are cast to integers: PostgreSQL's comparisons are booleans,
#: which it neither sums nor unites with ``spend_hours``' integer columns.
_HOUR = truncated("ts / 3600")


def _window_sql(hour: str) -> str:
    return f"""
WITH parts AS (
    SELECT CAST(origin IN {EXTRACTION!r} AS INTEGER) AS extraction, protocol, 1 AS calls,
           CAST(cost_usd IS NOT NULL AS INTEGER) AS priced, COALESCE(cost_usd, 0) AS usd,
           input_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens,
           output_tokens
    FROM exchanges
    WHERE ts >= ? AND ts < ? AND {hour} <= ?
      AND origin IN ('client', {", ".join(repr(o) for o in EXTRACTION)})
    UNION ALL
    SELECT extraction, protocol, calls, priced, usd, input_tokens, cache_read_tokens,
           cache_write_tokens, cache_write_1h_tokens, output_tokens
    FROM spend_hours WHERE hour > ?
)
SELECT extraction,
       CASE WHEN SUM(priced) = SUM(calls) THEN SUM(usd) END,
       SUM({_weighted_sql()})
FROM parts
GROUP BY extraction
"""


_WINDOW = {name: _window_sql(hour) for name, hour in _HOUR.items()}


def window(conn: Connection, now: float | None = None) -> tuple[Spend, Spend]:
    """(the clients' spend, the extraction spend) over the last ``WINDOW_SECONDS``."""
    since = (time.time() if now is None else now) - WINDOW_SECONDS
    first = int(since // 3600)
    params = (since, (first + 2) * 3600.0, first, first)
    found = {
        bool(extraction): Spend(None if usd is None else float(usd), float(tokens or 0.0))
        for extraction, usd, tokens in conn.execute(_WINDOW[dialect(conn)], params)
    }
    nothing = Spend(0.0, 0.0)
    return found.get(False, nothing), found.get(True, nothing)


_LATEST_MODEL = (
    "SELECT model FROM exchanges WHERE origin = 'client' AND model IS NOT NULL "
    "ORDER BY ts DESC LIMIT 1"
)


def project_budget(
    conn: Connection,
    share: float,
    allowance_tokens: float,
    prices: PriceTable,
    model: str | None = None,
) -> Budget:
    """The project's budget as a run of ``model`` now would see it: its allowance priced at
    that model's input (None: the model the project's clients used last, what a hot run
    would use)."""
    client, shadow = window(conn)
    if model is None:
        row = conn.execute(_LATEST_MODEL).fetchone()
        model = row[0] if row else None
    price = prices.lookup(model)
    allowance_usd = None if price is None else allowance_tokens * price.input / 1e6
    return Budget(client, shadow, share, allowance_tokens, allowance_usd)


def describe(budget: Budget) -> dict[str, Any]:
    """The budget as ``ember stats --json`` shows it; ``unit`` says how it is counted."""
    unit = budget.unit(NOTHING)
    return {
        "window_days": WINDOW_SECONDS / 86_400,
        "unit": unit,
        "share": budget.share,
        "clients": budget.client.usd if unit == "usd" else budget.client.tokens,
        "allowance": budget.allowance_usd if unit == "usd" else budget.allowance_tokens,
        "limit": budget.limit(unit),
        "spent": budget.spent(unit),
        "left": budget.left(unit),
    }


def sentence(budget: Budget) -> str:
    """One line: what the shadow spent of its budget, and how the budget is made."""
    unit = budget.unit(NOTHING)
    clients = budget.client.usd if unit == "usd" else budget.client.tokens
    allowance = budget.allowance_usd if unit == "usd" else budget.allowance_tokens
    how = (
        ""
        if unit == "usd"
        else " (in weighted tokens: a call here has no dollar cost: its model has no price, "
        "or it broke off before reporting usage)"
    )
    return (
        f"shadow memory, last 7 days: spent {fmt(budget.spent(unit), unit)} of "
        f"{fmt(budget.limit(unit), unit)} = {budget.share:.0%} of the clients' "
        f"{fmt(clients, unit)} + {fmt(allowance, unit)} allowance{how}; "
        f"{fmt(max(0.0, budget.left(unit)), unit)} left"
    )
