"""What a project spent in this UTC day and month (SQL only).

The hourly sums (``spend_hours``, kept by a trigger with every accounting row) give the
client's and the extraction's spend without reading the rows; memory tool rounds
(``owned_tools``), which those sums leave out, are added from the rows of the month (few:
tool mode only).
"""

from __future__ import annotations

from ember.budget.policy import day_start, month_start
from ember.store.driver import Connection

_HOURS = (
    "SELECT COALESCE(SUM(CASE WHEN hour >= :day THEN usd END), 0), COALESCE(SUM(usd), 0) "
    "FROM spend_hours WHERE hour >= :month"
)
_OTHERS = (
    "SELECT COALESCE(SUM(CASE WHEN ts >= :day THEN cost_usd END), 0), "
    "COALESCE(SUM(cost_usd), 0) FROM exchanges "
    "WHERE ts >= :month AND origin NOT IN ('client', 'shadow', 'steward')"
)


def spent(conn: Connection, now: float) -> tuple[float, float]:
    """(this UTC day, this UTC month) in dollars, priced calls only."""
    day, month = day_start(now), month_start(now)
    hours = conn.execute(_HOURS, {"day": int(day // 3600), "month": int(month // 3600)})
    h_day, h_month = hours.fetchone()
    o_day, o_month = conn.execute(_OTHERS, {"day": day, "month": month}).fetchone()
    return float(h_day + o_day), float(h_month + o_month)
