"""Output shaping on the dashboard (``Feature.views``): what it saved, estimated and measured
with their bands, and per day — ``ember output-savings --json``, read through the process's
storage owner — and its part of the savings ledger (``ember.savings.RATES_VIEW``: output
tokens saved per shaped request, by model family, and its block's tokens)."""

from __future__ import annotations

from typing import Any

from ember.savings import RATES_VIEW
from ember.shaping.rates import output_rates
from ember.shaping.recorder import StoredState, read_state
from ember.shaping.report import report_json
from ember.shaping.savings import build_report
from ember.shaping.state import ShapingState
from ember.store.registry import stats_db_path
from ember.store.schema import STATS
from ember.views import Query, Route, ViewContext, ViewError


def _state(ctx: ViewContext) -> ShapingState:
    path = stats_db_path(ctx.home)
    there = ctx.storage.holds(path, STATS)  # its file, or its schema: a read makes neither
    database = (lambda: ctx.storage.database(path, STATS)) if there else None
    return ShapingState(ctx.home, database)


def _stored(state: ShapingState) -> StoredState:
    try:
        return read_state(state)
    except ValueError as exc:
        raise ViewError(503, f"shaping's state cannot be read: {exc}") from exc


def savings(ctx: ViewContext, q: Query) -> dict[str, Any]:
    state = _state(ctx)
    stored = _stored(state)
    return report_json(build_report(stored.ledger, stored.baseline), ctx.settings, state)


def rates(ctx: ViewContext, q: Query) -> dict[str, Any]:
    return output_rates(_stored(_state(ctx)))


def views() -> tuple[Route, ...]:
    return (Route("GET", "savings", savings), Route("GET", RATES_VIEW, rates))
