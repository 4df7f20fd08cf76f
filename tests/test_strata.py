"""Strata from request-time features, and per-session holdout arms."""

from __future__ import annotations

import pytest

from ember.strata import (
    assign_arm,
    input_bucket,
    model_family,
    parse_stratum,
    stratum_key,
)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet"),
        ("claude-3-5-haiku-20241022", "claude-haiku"),
        ("claude-opus-4-1", "claude-opus"),
        ("gpt-5-mini", "gpt-5"),
        ("gpt-4.1", "gpt-4"),
        ("o3-mini", "o-series"),
        ("llama-3", "other"),
        (None, "other"),
    ],
)
def test_model_family_drops_versions_and_dates(model: str | None, family: str) -> None:
    assert model_family(model) == family


def test_input_buckets_follow_the_body_size() -> None:
    assert input_bucket(1_000) == "<2k"
    assert input_bucket(4 * 2_000) == "2k-8k"
    assert input_bucket(4 * 40_000) == "32k-128k"
    assert input_bucket(4 * 500_000) == ">=128k"


def test_stratum_label_round_trips() -> None:
    label = stratum_key("mechanical_continuation", 40_000, "claude-sonnet-4-5", True)
    assert label == "mechanical_continuation|8k-32k|claude-sonnet|tools"
    assert parse_stratum(label) == ("mechanical_continuation", "8k-32k", "claude-sonnet", "tools")
    with pytest.raises(ValueError):
        parse_stratum("a|b")


def test_arms_are_per_session_deterministic_and_near_the_holdout_fraction() -> None:
    ids = [f"session-{i}" for i in range(4000)]
    arms = [assign_arm(s, 0.1) for s in ids]
    assert arms == [assign_arm(s, 0.1) for s in ids]  # same session, same arm, every time
    share = arms.count("control") / len(arms)
    assert 0.08 < share < 0.12
    assert {assign_arm(s, 0.0) for s in ids} == {"treatment"}
    assert {assign_arm(s, 1.0) for s in ids} == {"control"}
    # raising the holdout only moves sessions from treatment to control, never back
    assert all(
        assign_arm(s, 0.2) == "control" for s, a in zip(ids, arms, strict=True) if a == "control"
    )
