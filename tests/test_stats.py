"""Statistics against known samples: running moments, both savings numbers, their bands."""

from __future__ import annotations

import math
import statistics

import pytest

from ember.stats import (
    Z95,
    RunningStats,
    estimate_from_baseline,
    measured_from_holdout,
    normal_interval,
)


def stats_of(*xs: float) -> RunningStats:
    s = RunningStats()
    for x in xs:
        s.add(x)
    return s


def test_running_moments_match_the_textbook() -> None:
    xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    s = stats_of(*xs)
    assert s.n == 8 and s.mean == 5.0
    assert s.variance == pytest.approx(statistics.variance(xs))  # 32/7


def test_merging_equals_adding_everything_to_one() -> None:
    a, b = [1.0, 10.0, 3.0], [7.0, 2.0, 2.0, 8.0]
    merged = stats_of(*a).merged(stats_of(*b))
    whole = stats_of(*a, *b)
    assert merged.n == whole.n
    assert merged.mean == pytest.approx(whole.mean)
    assert merged.m2 == pytest.approx(whole.m2)
    assert stats_of().merged(stats_of(3.0)).mean == 3.0


def test_json_round_trip_and_rejection() -> None:
    s = stats_of(1.0, 2.0, 6.0)
    assert RunningStats.from_json(s.to_json()) == s
    for bad in ([1, 2], ["1", 2, 3], [-1, 0, 0], [1, float("nan"), 0], {"n": 1}):
        with pytest.raises(ValueError):
            RunningStats.from_json(bad)


def test_interval_is_symmetric_at_z95() -> None:
    iv = normal_interval(10.0, 4.0)
    assert iv.low == pytest.approx(10 - 2 * Z95) and iv.high == pytest.approx(10 + 2 * Z95)
    assert normal_interval(1.0, None).low is None


def test_estimated_savings_are_signed_and_never_clipped() -> None:
    # baseline: stratum A mean 100 (var 100 over 10 samples), stratum B mean 50 (var 25, 5)
    baseline = {
        "A": RunningStats(10, 100.0, 100.0 * 9),
        "B": RunningStats(5, 50.0, 25.0 * 4),
    }
    # shaped: A two requests of 60 and 80 (saved 40 + 20), B one request of 70 (lost 20)
    treatment = {"A": stats_of(60.0, 80.0), "B": stats_of(70.0)}
    est = estimate_from_baseline(treatment, baseline)
    assert est.saved_tokens.value == pytest.approx(40 + 20 - 20)  # the loss counts
    var = 100.0 * (2 + 4 / 10) + 25.0 * (1 + 1 / 5)
    assert est.saved_tokens.high == pytest.approx(40 + Z95 * math.sqrt(var))
    assert est.relative is not None
    assert est.relative.value == pytest.approx(40 / (2 * 100 + 50))
    assert (est.requests, est.strata, est.strata_left_out) == (3, 2, 0)


def test_estimate_leaves_out_strata_without_a_usable_baseline() -> None:
    est = estimate_from_baseline(
        {"A": stats_of(10.0), "C": stats_of(5.0)}, {"A": RunningStats(1, 20.0, 0.0)}
    )
    assert (est.strata, est.strata_left_out, est.requests) == (0, 2, 0)
    assert est.saved_tokens.value == 0 and est.saved_tokens.low is None
    assert est.relative is None


def test_measured_uses_only_strata_present_in_both_arms() -> None:
    treatment = {"A": stats_of(60.0, 70.0, 80.0), "only-t": stats_of(1.0, 2.0)}
    control = {"A": stats_of(90.0, 100.0, 110.0, 100.0), "only-c": stats_of(5.0, 6.0)}
    m = measured_from_holdout(treatment, control)
    assert m.saved_tokens.value == pytest.approx(3 * (100.0 - 70.0))
    var_c, var_t = statistics.variance([90, 100, 110, 100]), statistics.variance([60, 70, 80])
    half = Z95 * math.sqrt(9 * (var_c / 4 + var_t / 3))
    assert m.saved_tokens.low == pytest.approx(90 - half)
    assert (m.strata, m.strata_left_out, m.requests) == (1, 2, 3)
    assert m.relative is not None and m.relative.value == pytest.approx(90 / 300)


def test_measured_savings_can_be_negative() -> None:
    m = measured_from_holdout({"A": stats_of(120.0, 130.0)}, {"A": stats_of(100.0, 110.0)})
    assert m.saved_tokens.value == pytest.approx(-40.0)
