"""Shaping's part of the savings ledger: ``ember output-savings``'s own numbers per model family,
per shaped request; and the panel's words for what is missing instead of "no data yet"."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.config import load_settings
from ember.savings import OutputRates
from ember.shaping.rates import NO_RATE, output_rates
from ember.shaping.recorder import StoredState
from ember.shaping.report import NO_BASELINE, NO_HOLDOUT, THIN_HOLDOUT, report_json
from ember.shaping.savings import Ledger, build_report
from ember.shaping.state import ShapingState
from ember.shaping.verbosity import steering_text
from ember.stats import RunningStats, estimate_from_baseline, measured_from_holdout
from ember.tokens import count_tokens

SONNET = "new_ask|8k-32k|claude-sonnet|tools"
GPT = "new_ask|<2k|gpt-5|no-tools"


def stats(*xs: float) -> RunningStats:
    s = RunningStats()
    for x in xs:
        s.add(x)
    return s


def test_each_family_gets_the_reports_estimate_per_shaped_request() -> None:
    ledger = Ledger(treatment={SONNET: stats(150, 170, 220, 240), GPT: stats(50, 60)})
    baseline = {SONNET: stats(100, 200, 300)}
    doc = output_rates(StoredState(ledger, baseline, None))
    rates = OutputRates.from_json(doc)
    expected = estimate_from_baseline({SONNET: ledger.treatment[SONNET]}, baseline)
    [family] = rates.families
    rate = rates.families[family]
    assert family == "claude-sonnet" and rate.label == "estimated" and rate.requests == 4
    assert rate.tokens == pytest.approx(expected.saved_tokens.value / 4)  # 20 tokens / 4
    assert rate.high == pytest.approx((expected.saved_tokens.high or 0) / 4)
    assert "gpt-5" not in rates.families  # no baseline: no number made up for it
    assert rates.block_tokens[2] == count_tokens(steering_text(2) or "")
    assert rates.why is None


def test_a_holdout_with_both_arms_is_used_and_labelled_measured() -> None:
    treatment = {SONNET: stats(150, 170, 220, 240)}
    ledger = Ledger(treatment=treatment, control={SONNET: stats(200, 240)})
    rates = OutputRates.from_json(output_rates(StoredState(ledger, {}, None)))
    measured = measured_from_holdout(treatment, ledger.control)
    rate = rates.families["claude-sonnet"]
    assert rate.label == "measured"
    assert rate.tokens == pytest.approx(measured.saved_tokens.value / 4)


def test_without_baseline_or_holdout_it_says_how_to_get_a_number() -> None:
    doc = output_rates(StoredState(Ledger(treatment={SONNET: stats(150, 170)}), {}, None))
    assert doc["families"] == {} and doc["why"] == NO_RATE
    assert "EMBER_OUTPUT_SHAPING=false" in NO_RATE and "output_holdout" in NO_RATE


@pytest.mark.parametrize(
    ("holdout", "control", "measured_why"),
    [(0.0, {}, NO_HOLDOUT), (0.1, {SONNET: stats(200)}, THIN_HOLDOUT)],
)
def test_the_panel_counts_every_shaped_request_and_says_what_is_missing(
    tmp_path: Path, holdout: float, control: dict[str, RunningStats], measured_why: str
) -> None:
    """Requests shaped at level 2 with no baseline: the panel read "shaped requests 0, no data
    yet" — it showed only the requests it could compare. Now the shaped requests are counted
    and each missing number says why."""
    ledger = Ledger(treatment={SONNET: stats(150, 170, 220)}, control=control)
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)}, output_holdout=holdout)
    doc = report_json(build_report(ledger, {}), settings, ShapingState(settings.home, None))
    assert doc["requests"]["treatment"] == 3
    assert doc["estimated"]["available"] is False and doc["estimated"]["why"] == NO_BASELINE
    assert doc["measured"]["why"] == measured_why
