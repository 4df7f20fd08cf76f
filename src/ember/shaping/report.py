"""What output shaping saved, as data: the one shape ``ember output-savings --json`` prints and
the dashboard draws (estimated against the unshaped baseline, measured against the holdout,
each with its 95% band)."""

from __future__ import annotations

from typing import Any

from ember.config import Settings
from ember.shaping.savings import SavingsReport
from ember.shaping.settings import ShapingSettings
from ember.shaping.state import ShapingState
from ember.stats import Interval, SavingsEstimate

HOLDOUT_HINT = (
    "To measure instead of estimate, leave a share of sessions unshaped: "
    "EMBER_OUTPUT_HOLDOUT=0.1 ember proxy  (or output_holdout = 0.1 in config.toml)."
)


def _interval(iv: Interval | None) -> dict[str, float | None] | None:
    if iv is None:
        return None
    return {"value": iv.value, "low": iv.low, "high": iv.high}


NO_BASELINE = (
    "no unshaped baseline for these requests yet: run the proxy with "
    "EMBER_OUTPUT_SHAPING=false for a while (its answers become the baseline), or measure "
    "with a holdout"
)
NO_HOLDOUT = "no measurement yet: set output_holdout (e.g. 0.1) to measure"
THIN_HOLDOUT = (
    "no measurement yet: the holdout has too few answers in the strata shaped requests are in "
    "(at least 2 in each arm)"
)


def _why(report: SavingsReport, holdout: float) -> tuple[str | None, str | None]:
    """Why the estimate and the measurement are not there (None where they are): a panel that
    read "shaped requests 0, no data yet" beside requests shaped at level 2 counted only the
    requests it could compare, and said nothing of what was missing."""
    if not report.treatment_requests:
        none = "no shaped request recorded yet"
        return none, none
    estimated = None if report.estimated.strata else NO_BASELINE
    measured = None
    if not report.measured.strata:
        measured = NO_HOLDOUT if holdout == 0 else THIN_HOLDOUT
    return estimated, measured


def _estimate_json(label: str, est: SavingsEstimate, why: str | None) -> dict[str, Any]:
    return {
        "label": label,
        "available": est.strata > 0,
        "why": why,
        "saved_output_tokens": _interval(est.saved_tokens),
        "saved_share": _interval(est.relative),
        "requests": est.requests,
        "strata": est.strata,
        "strata_left_out": est.strata_left_out,
        "confidence": 0.95,
    }


def report_json(report: SavingsReport, settings: Settings, state: ShapingState) -> dict[str, Any]:
    holdout = settings.section(ShapingSettings).output_holdout
    why_estimated, why_measured = _why(report, holdout)
    return {
        "ledger": state.where("ledger"),
        "baseline": state.where("verbosity"),
        "holdout": holdout,
        "estimated": _estimate_json("estimated", report.estimated, why_estimated),
        "measured": _estimate_json("measured", report.measured, why_measured),
        "echo_ratio": {
            arm: {"mean": s.mean, "answers": s.n} for arm, s in sorted(report.echo.items())
        },
        "requests": {"treatment": report.treatment_requests, "control": report.control_requests},
        "days": [{"day": d, **b.to_json()} for d, b in report.days],
        "how_to_measure": None if report.measured.strata else HOLDOUT_HINT,
    }
