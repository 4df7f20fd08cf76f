"""The dashboard's savings: the ledger (``ember.savings_ledger``) over the home's projects —
net saved this week and per day, each part beside it, why a part is empty — and per request.

Shaping's part comes from its declared view (``ember.savings.RATES_VIEW``), found by path
among the features' views: the dashboard imports no feature. A view that fails leaves shaping
without an estimate, saying why, and never takes the overview down.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ember.errors import EmberError
from ember.savings import BASIS, DAY, RATES_VIEW, OutputRates, Prices, Row
from ember.savings_ledger import Ledger, build, day_of
from ember.store.accounting import savings_rows
from ember.ui.home import HomeReader
from ember.views import Query, Route, ViewContext, ViewError

log = logging.getLogger(__name__)

WEEK = 7
NO_SHAPING = "no feature reports what output shaping saved (shaping is not registered)"


def output_rates(views: Mapping[str, Sequence[Route]], context: ViewContext) -> OutputRates:
    """Shaping's rates through its view; without one, no estimate and the reason."""
    for routes in views.values():
        for route in routes:
            if route.method != "GET" or route.path != RATES_VIEW:
                continue
            try:
                return OutputRates.from_json(route.handler(context, Query(None, {})))
            except (ViewError, ValueError, EmberError) as exc:
                log.warning("dashboard: output shaping's rates cannot be read: %s", exc)
                return OutputRates(why=f"shaping's state cannot be read: {exc}")
    return OutputRates(why=NO_SHAPING)


def overview(
    reader: HomeReader,
    days: int,
    only: str | None,
    prices: Prices,
    rates: OutputRates,
    now: float | None = None,
) -> dict[str, Any]:
    """The last ``days`` UTC days (a plot's points, empty days as zeros) and the last 7 days'
    totals ("saved $X net this week"), over one project (``only``) or all of them."""
    today = day_of(now if now is not None else time.time())
    first = today - days + 1
    week_first = today - WEEK + 1
    since = float(min(first, week_first) * DAY)
    ledger = Ledger(rates, since, per_session=False)
    for p in reader.projects():
        if only is not None and p.name != only:
            continue
        raw = reader.cached(p, f"savings:{since}", functools.partial(savings_rows, since=since))
        ledger.add_rows((Row.of(r) for r in raw), prices, key=f"{p.name}/")
    window, week = ledger.span(first, today), ledger.span(week_first, today)
    return {
        "days": window.days_json(first, days),
        "window": window.total.to_json() | {"days": days, "why": window.why()},
        "week": week.total.to_json() | {"days": WEEK, "why": week.why()},
        "basis": BASIS,
    }


def per_request(
    rows: list[dict[str, Any]], session: list[dict[str, Any]], prices: Prices, rates: OutputRates
) -> None:
    """Give each of a session's request rows its ``savings`` (net, saved, spent, parts), from
    all of the session's rows (a block written by an earlier request is re-read later)."""
    ledger = build(session, prices, rates, per_request=True)
    for row in rows:
        tally = ledger.requests.get(row["id"])
        row["savings"] = tally.brief() if tally is not None else None
