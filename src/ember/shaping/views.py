"""Output shaping on the dashboard (``Feature.views``): what it saved, estimated and measured
with their bands, and per day — ``ember output-savings --json``, read through the process's
storage owner."""

from __future__ import annotations

from typing import Any

from ember.shaping.recorder import read_state
from ember.shaping.report import report_json
from ember.shaping.savings import build_report
from ember.shaping.state import ShapingState
from ember.store.registry import stats_db_path
from ember.store.schema import STATS
from ember.views import Query, Route, ViewContext, ViewError


def savings(ctx: ViewContext, q: Query) -> dict[str, Any]:
    path = stats_db_path(ctx.home)
    there = ctx.storage.holds(path, STATS)  # its file, or its schema: a read makes neither
    database = (lambda: ctx.storage.database(path, STATS)) if there else None
    state = ShapingState(ctx.home, database)
    try:
        stored = read_state(state)
    except ValueError as exc:
        raise ViewError(503, f"shaping's state cannot be read: {exc}") from exc
    return report_json(build_report(stored.ledger, stored.baseline), ctx.settings, state)


def views() -> tuple[Route, ...]:
    return (Route("GET", "savings", savings),)
