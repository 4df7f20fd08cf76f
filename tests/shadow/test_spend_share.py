"""The shadow's budget (pure): a share of the project's client spend over a window, plus an
allowance; dollars when everything has a price, weighted tokens when anything has none."""

from __future__ import annotations

import pytest

from ember.shadow.spend_share import Budget, Spend, weighted_tokens


def test_a_cache_read_counts_a_tenth_of_a_fresh_token_and_output_as_priced() -> None:
    assert weighted_tokens("anthropic", 100, cache_read=1000, output=10) == 100 + 100 + 50
    assert weighted_tokens("openai_responses", 100, cache_read=1000, output=10) == 100 + 100 + 80
    # a 1-hour write is billed 2x, a 5-minute one 1.25x (cache_write includes both)
    assert weighted_tokens("anthropic", 0, cache_write=300, cache_write_1h=100) == 250 + 200


def test_one_short_session_is_read_where_a_per_session_cap_of_ten_percent_refused_it() -> None:
    """The measured case: Claude Code's one-shot session wrote ~39k tokens to the cache
    ($0.148 at Sonnet prices) and a hot read of it costs ~$0.017, past 10% of the session."""
    budget = Budget(Spend(0.148, 49_000), Spend(0.0, 0.0), 0.15, 20_000, 0.06)
    assert budget.refusal(Spend(0.0169, 5_600)) is None


def test_a_run_past_the_share_and_the_allowance_waits_and_says_why() -> None:
    budget = Budget(Spend(1.00, 300_000), Spend(0.20, 60_000), 0.15, 20_000, 0.02)
    reason = budget.refusal(Spend(0.0169, 5_000))
    assert reason is not None
    assert "$0.1700" in reason and "15%" in reason and "$1.0000" in reason
    assert "stay unread" in reason
    assert budget.refusal(Spend(0.0, 0.0)) is not None  # already past it: nothing more goes


def test_a_model_without_a_price_is_budgeted_by_tokens_and_says_so() -> None:
    # The clients' default model has no price: their dollars are unknown.
    budget = Budget(Spend(None, 40_000), Spend(0.0, 0.0), 0.15, 20_000, 0.06)
    estimate = Spend(0.02, 4_300)
    assert budget.unit(estimate) == "tokens"
    assert budget.refusal(estimate) is None  # 4.3k of 0.15 * 40k + 20k
    assert budget.left("tokens") == pytest.approx(26_000)
    crowded = Budget(Spend(None, 40_000), Spend(None, 24_000), 0.15, 20_000, 0.06)
    reason = crowded.refusal(estimate)
    assert reason is not None and "weighted tokens" in reason and "26.0k tokens" in reason


def test_spend_adds_up_and_an_unknown_price_stays_unknown() -> None:
    assert Spend(0.1, 10) + Spend(0.2, 20) == Spend(pytest.approx(0.3), 30)  # type: ignore[arg-type]
    assert (Spend(0.1, 10) + Spend(None, 5)).usd is None


def test_no_allowance_and_no_share_lets_nothing_run() -> None:
    budget = Budget(Spend(1.0, 100_000), Spend(0.0, 0.0), 0.0, 0, 0.0)
    assert budget.refusal(Spend(0.001, 10)) is not None


def test_amounts_read_as_a_person_would_say_them() -> None:
    from ember.shadow.spend_share import fmt

    assert [fmt(v, "tokens") for v in (12, 4_027.8, 4_027_800)] == [
        "12 tokens",
        "4.0k tokens",
        "4.0M tokens",
    ]
    assert fmt(0.01234, "usd") == "$0.0123" and fmt(None, "usd") == "?"
