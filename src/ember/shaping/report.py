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


def _estimate_json(label: str, est: SavingsEstimate) -> dict[str, Any]:
    return {
        "label": label,
        "available": est.strata > 0,
        "saved_output_tokens": _interval(est.saved_tokens),
        "saved_share": _interval(est.relative),
        "requests": est.requests,
        "strata": est.strata,
        "strata_left_out": est.strata_left_out,
        "confidence": 0.95,
    }


def report_json(report: SavingsReport, settings: Settings, state: ShapingState) -> dict[str, Any]:
    return {
        "ledger": state.where("ledger"),
        "baseline": state.where("verbosity"),
        "holdout": settings.section(ShapingSettings).output_holdout,
        "estimated": _estimate_json("estimated", report.estimated),
        "measured": _estimate_json("measured", report.measured),
        "echo_ratio": {
            arm: {"mean": s.mean, "answers": s.n} for arm, s in sorted(report.echo.items())
        },
        "requests": {"treatment": report.treatment_requests, "control": report.control_requests},
        "days": [{"day": d, **b.to_json()} for d, b in report.days],
        "how_to_measure": None if report.measured.strata else HOLDOUT_HINT,
    }
