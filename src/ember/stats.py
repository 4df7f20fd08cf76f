"""Statistics for savings accounting, with 95% confidence bands (pure).

Output savings are a counterfactual: the tokens a shaped answer *would* have had unshaped are
never observed. So there are two numbers, never merged into one:

- **estimated** (``estimate_from_baseline``): per stratum, the baseline mean (from unshaped
  history) minus what shaped requests actually produced, summed *with its sign*. Clipping
  each request at zero would count every long shaped answer as "no loss" and every short one
  as a win -- a systematic over-statement.
- **measured** (``measured_from_holdout``): per stratum present in both arms, the control
  mean minus the treatment mean, weighted by treatment requests. The only number that may be
  called measured.

Both carry a normal-approximation 95% band; a band needs at least two samples on each side of
a stratum, so strata thinner than that are left out (and counted as left out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054


@dataclass
class RunningStats:
    """Count, mean and sum of squared deviations, updated one value at a time (Welford) and
    mergeable (Chan et al.), so two proxies' tallies combine without keeping samples."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def merged(self, other: RunningStats) -> RunningStats:
        if other.n == 0:
            return RunningStats(self.n, self.mean, self.m2)
        if self.n == 0:
            return RunningStats(other.n, other.mean, other.m2)
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return RunningStats(n, mean, m2)

    @property
    def variance(self) -> float | None:
        """Sample variance (n - 1), None below two samples."""
        return self.m2 / (self.n - 1) if self.n >= 2 else None

    @property
    def total(self) -> float:
        return self.n * self.mean

    def to_json(self) -> list[float]:
        return [self.n, self.mean, self.m2]

    @classmethod
    def from_json(cls, data: Any) -> RunningStats:
        """Parse ``[n, mean, m2]``; raises ``ValueError`` on anything else."""
        if (
            not isinstance(data, list)
            or len(data) != 3
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in data)
            or data[0] < 0
            or data[2] < 0
            or not all(math.isfinite(v) for v in data)
        ):
            raise ValueError(f"not a [n, mean, m2] triple: {data!r}")
        return cls(int(data[0]), float(data[1]), float(data[2]))


@dataclass(frozen=True)
class Interval:
    value: float
    low: float | None
    high: float | None


def normal_interval(value: float, variance: float | None) -> Interval:
    if variance is None or variance < 0:
        return Interval(value, None, None)
    half = Z95 * math.sqrt(variance)
    return Interval(value, value - half, value + half)


@dataclass(frozen=True)
class SavingsEstimate:
    """Output tokens saved over ``requests`` shaped requests, with a 95% band; ``relative`` is
    that over the counterfactual total (the band scaled alike). ``strata`` were used,
    ``strata_left_out`` had too few samples on one side."""

    saved_tokens: Interval
    relative: Interval | None
    requests: int
    strata: int
    strata_left_out: int


def _estimate(
    parts: list[tuple[float, float, float]], requests: int, left_out: int
) -> SavingsEstimate:
    """``parts``: per stratum ``(saved, variance, counterfactual total)``."""
    saved = sum(p[0] for p in parts)
    variance = sum(p[1] for p in parts)
    counterfactual = sum(p[2] for p in parts)
    tokens = normal_interval(saved, variance) if parts else Interval(0.0, None, None)
    relative = None
    if counterfactual > 0:
        scale = 1 / counterfactual
        relative = Interval(
            saved * scale,
            None if tokens.low is None else tokens.low * scale,
            None if tokens.high is None else tokens.high * scale,
        )
    return SavingsEstimate(tokens, relative, requests, len(parts), left_out)


def estimate_from_baseline(
    treatment: Mapping[str, RunningStats], baseline: Mapping[str, RunningStats]
) -> SavingsEstimate:
    """Σ over shaped requests of (baseline mean of its stratum - its output), signed.

    Variance: the counterfactual total of ``n`` requests in a stratum is ``n`` draws around a
    mean estimated from ``N`` baseline samples, ``s² (n + n²/N)``; the observed total is known.
    """
    parts: list[tuple[float, float, float]] = []
    requests = left_out = 0
    for key, t in treatment.items():
        b = baseline.get(key)
        if t.n == 0:
            continue
        if b is None or b.variance is None:
            left_out += 1
            continue
        parts.append((t.n * (b.mean - t.mean), b.variance * (t.n + t.n * t.n / b.n), t.n * b.mean))
        requests += t.n
    return _estimate(parts, requests, left_out)


def measured_from_holdout(
    treatment: Mapping[str, RunningStats], control: Mapping[str, RunningStats]
) -> SavingsEstimate:
    """Σ over strata in both arms of n_treatment x (control mean - treatment mean).

    Variance per stratum: n_t² (s_c²/n_c + s_t²/n_t). Strata seen in one arm only carry no
    comparison and are left out, never filled in from the other arm.
    """
    parts: list[tuple[float, float, float]] = []
    requests = left_out = 0
    for key in sorted(set(treatment) | set(control)):
        t, c = treatment.get(key), control.get(key)
        if t is None or c is None or t.variance is None or c.variance is None:
            left_out += 1
            continue
        var = t.n * t.n * (c.variance / c.n + t.variance / t.n)
        parts.append((t.n * (c.mean - t.mean), var, t.n * c.mean))
        requests += t.n
    return _estimate(parts, requests, left_out)
