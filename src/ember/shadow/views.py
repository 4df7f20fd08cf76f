"""Shadow memory on the dashboard (``Feature.views``): its runs (hot or cold, what each read
and cost, a skipped run's reason), the facts they proposed and what became of them, and the
project's budget — the same reads as ``ember shadow runs|proposals`` and ``ember stats``."""

from __future__ import annotations

from typing import Any

from ember.shadow import compare, pairing, reads, spend
from ember.shadow.compare import Side
from ember.shadow.settings import ShadowSettings
from ember.views import Query, Route, ViewContext, ViewError


def _side(q: Query) -> Side:
    side = q.params.get("side", "shadow")
    if side not in ("shadow", "steward"):
        raise ViewError(400, f"side={side!r}: choose shadow or steward")
    return "shadow" if side == "shadow" else "steward"


def runs(ctx: ViewContext, q: Query) -> dict[str, Any]:
    """Runs newest first (at most ``limit``), the proposals of those runs, and the budget."""
    side = _side(q)
    limit = q.number("limit", 100, 1, 5000)
    options = ctx.settings.section(ShadowSettings)
    prices = ctx.settings.price_table()

    def read(conn: Any) -> dict[str, Any]:
        found = reads.runs(conn, side, limit)
        budget = spend.project_budget(
            conn, options.shadow_max_share, float(options.shadow_allowance_tokens), prices
        )
        proposals = reads.proposals(conn, side)[-500:]
        return {
            "runs": [_run(r) for r in found],
            "proposals": [_proposal(p) for p in reversed(proposals)],
            "budget": spend.describe(budget),
            "mode": options.shadow,
        }

    return ctx.project_db(q.needs_project()).read(read)


def _run(r: dict[str, Any]) -> dict[str, Any]:
    return r | {"cost_usd": r.get("estimated_usd")}


def _proposal(p: dict[str, Any]) -> dict[str, Any]:
    status = (
        "invalid" if p.get("validation_error") else ("stored" if p.get("memory_id") else "proposed")
    )
    return p | {"status": status}


def comparison(ctx: ViewContext, q: Query) -> dict[str, Any]:
    """``ember shadow compare --json`` without its semantic pairing (that calls a model: the
    CLI asks for it on purpose)."""
    inputs = ctx.project_db(q.needs_project()).read(reads.compare_inputs)
    skipped = pairing.not_computed("run ember shadow compare --semantic for it (calls a model)")
    return compare.report(inputs, skipped)


def views() -> tuple[Route, ...]:
    return (Route("GET", "runs", runs), Route("GET", "compare", comparison))
