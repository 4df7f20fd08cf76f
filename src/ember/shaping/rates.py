"""What output shaping saved per shaped request, by model family: its part of the savings
ledger (``ember.savings.OutputRates``; pure: the stored ledger and baseline in, JSON out).

The numbers are ``ember output-savings``'s own, split by model family (a stratum names its
family, and an output token's price depends on the model): per family, the measured saving
against holdout sessions where the holdout has both arms, else the estimate against the
unshaped baseline, divided by the shaped requests it rests on. Nothing new is estimated here;
a family without either has no rate, and ``why`` says what would give it one.

Also the verbosity block's tokens per level (ember's estimator): the block rides at the system
tail of every shaped request, a cost the ledger nets against what shaping saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.shaping.recorder import StoredState
from ember.shaping.verbosity import MAX_LEVEL, steering_text
from ember.stats import RunningStats, SavingsEstimate, estimate_from_baseline
from ember.stats import measured_from_holdout as measured
from ember.strata import parse_stratum
from ember.tokens import count_tokens

NO_RATE = (
    "shaping: no estimate yet. There is no unshaped baseline for its requests: run the proxy "
    "with EMBER_OUTPUT_SHAPING=false for a while, or set output_holdout (e.g. 0.1) to measure "
    "against sessions left unshaped."
)


def _family(stratum: str) -> str | None:
    try:
        return parse_stratum(stratum)[2]
    except ValueError:
        return None


def _of(strata: Mapping[str, RunningStats], family: str) -> dict[str, RunningStats]:
    return {k: v for k, v in strata.items() if _family(k) == family}


def _per_request(est: SavingsEstimate, label: str) -> dict[str, Any]:
    n, iv = est.requests, est.saved_tokens
    return {
        "tokens_per_request": iv.value / n,
        "low": None if iv.low is None else iv.low / n,
        "high": None if iv.high is None else iv.high / n,
        "label": label,
        "requests": n,
    }


def output_rates(stored: StoredState) -> dict[str, Any]:
    """``{"families": {family: rate}, "block_tokens": {level: tokens}, "why": str | None}``."""
    ledger, families = stored.ledger, {}
    for family in sorted({f for f in map(_family, ledger.treatment) if f is not None}):
        treatment = _of(ledger.treatment, family)
        found = measured(treatment, _of(ledger.control, family))
        label = "measured"
        if not found.strata or not found.requests:
            found = estimate_from_baseline(treatment, _of(stored.baseline, family))
            label = "estimated"
        if found.strata and found.requests:
            families[family] = _per_request(found, label)
    blocks = {}
    for level in range(1, MAX_LEVEL + 1):
        text = steering_text(level)
        blocks[str(level)] = count_tokens(text) if text else 0
    return {"families": families, "block_tokens": blocks, "why": None if families else NO_RATE}
