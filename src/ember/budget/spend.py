"""What a project spent in this UTC day and month (SQL only).

The hourly sums (``spend_hours``, kept by a trigger with every accounting row) give the
client's and the extraction's spend without reading the rows; memory tool rounds
(``owned_tools``), which those sums leave out, are added from the rows of the month (few:
tool mode only).

Parameters are ``?`` marks, never ``:name``: the statements run on a PostgreSQL store too,
whose connection speaks the store's ``?`` only (``store.pg.connection``); a ``:name`` would
fail there on the first budgeted request.
"""

from __future__ import annotations

from ember.budget.policy import day_start, month_start
from ember.store.driver import Connection

#: parameters: the day's first hour, the month's first hour (hours since the epoch)
HOURS = (
    "SELECT COALESCE(SUM(CASE WHEN hour >= ? THEN usd END), 0), COALESCE(SUM(usd), 0) "
    "FROM spend_hours WHERE hour >= ?"
)
#: parameters: the day's start, the month's start (seconds since the epoch)
OTHERS = (
    "SELECT COALESCE(SUM(CASE WHEN ts >= ? THEN cost_usd END), 0), "
    "COALESCE(SUM(cost_usd), 0) FROM exchanges "
    "WHERE ts >= ? AND origin NOT IN ('client', 'shadow', 'steward')"
)


def spent(conn: Connection, now: float) -> tuple[float, float]:
    """(this UTC day, this UTC month) in dollars, priced calls only."""
    day, month = day_start(now), month_start(now)
    h_day, h_month = conn.execute(HOURS, (int(day // 3600), int(month // 3600))).fetchone()
    o_day, o_month = conn.execute(OTHERS, (day, month)).fetchone()
    return float(h_day + o_day), float(h_month + o_month)
