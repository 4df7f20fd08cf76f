"""The savings ledger and the report built from it (pure: JSON in, JSON out, no files).

The ledger keeps, per arm and stratum, running statistics of output tokens; per arm, of the
echo ratio; and per UTC day, totals for the chart of savings over time. Everything in it is
additive or mergeable (``RunningStats``), so several proxies sharing one file each add their
own delta and nothing is lost or counted twice (``recorder`` does the file side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.stats import (
    RunningStats,
    SavingsEstimate,
    estimate_from_baseline,
    measured_from_holdout,
)

LEDGER_VERSION = 1
#: Days kept for the chart; older days are dropped from the file (totals are kept per stratum).
MAX_DAYS = 400
_DAY_FIELDS = (
    "treatment_requests",
    "treatment_output",
    "control_requests",
    "control_output",
    "estimated_requests",
)

Strata = dict[str, RunningStats]


@dataclass
class DayBucket:
    treatment_requests: int = 0
    treatment_output: int = 0
    control_requests: int = 0
    control_output: int = 0
    #: shaped requests of the day whose stratum had a baseline, and their signed savings
    estimated_requests: int = 0
    estimated_saved: float = 0.0

    def merged(self, o: DayBucket) -> DayBucket:
        return DayBucket(
            self.treatment_requests + o.treatment_requests,
            self.treatment_output + o.treatment_output,
            self.control_requests + o.control_requests,
            self.control_output + o.control_output,
            self.estimated_requests + o.estimated_requests,
            self.estimated_saved + o.estimated_saved,
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {f: getattr(self, f) for f in _DAY_FIELDS}
        data["estimated_saved"] = self.estimated_saved
        return data

    @classmethod
    def from_json(cls, data: Any) -> DayBucket:
        if not isinstance(data, dict):
            raise ValueError(f"not a day bucket: {data!r}")
        ints = [data.get(f, 0) for f in _DAY_FIELDS]
        saved = data.get("estimated_saved", 0.0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints) or not (
            isinstance(saved, int | float) and not isinstance(saved, bool)
        ):
            raise ValueError(f"not a day bucket: {data!r}")
        return cls(ints[0], ints[1], ints[2], ints[3], ints[4], float(saved))


def _merge_strata(a: Mapping[str, RunningStats], b: Mapping[str, RunningStats]) -> Strata:
    out = {k: RunningStats(v.n, v.mean, v.m2) for k, v in a.items()}
    for k, v in b.items():
        out[k] = out[k].merged(v) if k in out else RunningStats(v.n, v.mean, v.m2)
    return out


def strata_from_json(data: Any) -> Strata:
    """``{stratum: [n, mean, m2]}``; raises ``ValueError`` on a malformed entry."""
    if not isinstance(data, dict):
        raise ValueError("expected an object of strata")
    return {str(k): RunningStats.from_json(v) for k, v in data.items()}


def strata_to_json(strata: Mapping[str, RunningStats]) -> dict[str, Any]:
    return {k: strata[k].to_json() for k in sorted(strata)}


@dataclass
class Ledger:
    treatment: Strata = field(default_factory=dict)
    control: Strata = field(default_factory=dict)
    echo: dict[str, RunningStats] = field(default_factory=dict)
    days: dict[str, DayBucket] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.treatment or self.control or self.echo or self.days)

    def record(
        self,
        arm: str,
        stratum: str,
        output_tokens: int,
        echo: float | None,
        day: str,
        baseline_mean: float | None,
    ) -> None:
        """One answered request. ``baseline_mean`` is its stratum's baseline mean when there
        is one (shaped requests only): the day's signed estimated savings grow by
        ``baseline_mean - output_tokens``."""
        strata = self.treatment if arm == "treatment" else self.control
        strata.setdefault(stratum, RunningStats()).add(output_tokens)
        if echo is not None:
            self.echo.setdefault(arm, RunningStats()).add(echo)
        bucket = self.days.setdefault(day, DayBucket())
        if arm == "treatment":
            bucket.treatment_requests += 1
            bucket.treatment_output += output_tokens
            if baseline_mean is not None:
                bucket.estimated_requests += 1
                bucket.estimated_saved += baseline_mean - output_tokens
        else:
            bucket.control_requests += 1
            bucket.control_output += output_tokens

    def merged(self, other: Ledger) -> Ledger:
        days = dict(self.days)
        for day, b in other.days.items():
            days[day] = days[day].merged(b) if day in days else b
        keep = sorted(days)[-MAX_DAYS:]
        return Ledger(
            _merge_strata(self.treatment, other.treatment),
            _merge_strata(self.control, other.control),
            _merge_strata(self.echo, other.echo),
            {d: days[d] for d in keep},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": LEDGER_VERSION,
            "treatment": strata_to_json(self.treatment),
            "control": strata_to_json(self.control),
            "echo": strata_to_json(self.echo),
            "days": {d: self.days[d].to_json() for d in sorted(self.days)},
        }

    @classmethod
    def from_json(cls, data: Any) -> Ledger:
        """Parse a ledger file's content; raises ``ValueError`` when it is not one."""
        if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION:
            raise ValueError("not a version-1 savings ledger")
        days = data.get("days", {})
        if not isinstance(days, dict):
            raise ValueError("days: expected an object")
        return cls(
            strata_from_json(data.get("treatment", {})),
            strata_from_json(data.get("control", {})),
            strata_from_json(data.get("echo", {})),
            {str(d): DayBucket.from_json(b) for d, b in days.items()},
        )


@dataclass(frozen=True)
class SavingsReport:
    estimated: SavingsEstimate
    measured: SavingsEstimate
    echo: dict[str, RunningStats]
    days: list[tuple[str, DayBucket]]
    treatment_requests: int
    control_requests: int
    baseline_strata: int


def build_report(ledger: Ledger, baseline: Mapping[str, RunningStats]) -> SavingsReport:
    return SavingsReport(
        estimated=estimate_from_baseline(ledger.treatment, baseline),
        measured=measured_from_holdout(ledger.treatment, ledger.control),
        echo=dict(ledger.echo),
        days=sorted(ledger.days.items()),
        treatment_requests=sum(s.n for s in ledger.treatment.values()),
        control_requests=sum(s.n for s in ledger.control.values()),
        baseline_strata=len(baseline),
    )
