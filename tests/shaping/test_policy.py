"""Turn classification by structure and the effort decisions (pure)."""

from __future__ import annotations

import pytest

from ember.protocols.base import EffortFields
from ember.shaping.policy import (
    ANTHROPIC_EFFORT_RANK,
    OPENAI_EFFORT_RANK,
    TurnKind,
    budget_clamp_allowed,
    can_create_verbosity,
    clamp_thinking_budget,
    classify_turn,
    lower_effort,
    params_broke_cache,
    plan_effort,
)


@pytest.mark.parametrize(
    ("parts", "kind"),
    [
        (("text",), TurnKind.NEW_ASK),
        (("tool_result", "text"), TurnKind.NEW_ASK),
        (("image",), TurnKind.NEW_ASK),
        (("document", "tool_error"), TurnKind.NEW_ASK),
        (("tool_result", "tool_result"), TurnKind.MECHANICAL_CONTINUATION),
        (("tool_result", "tool_error"), TurnKind.ERROR_CONTINUATION),
        (("tool_error",), TurnKind.ERROR_CONTINUATION),
        ((), TurnKind.UNKNOWN),
        (("other",), TurnKind.UNKNOWN),
        (("tool_result", "other"), TurnKind.UNKNOWN),
    ],
)
def test_turns_are_classified_by_structure(parts: tuple[str, ...], kind: TurnKind) -> None:
    assert classify_turn(parts) == kind


def test_lowering_never_creates_and_never_raises() -> None:
    rank = ANTHROPIC_EFFORT_RANK
    assert lower_effort("high", "low", rank) == "low"
    assert lower_effort("max", "medium", rank) == "medium"
    assert lower_effort(None, "low", rank) is None  # absent: never created
    assert lower_effort("low", "low", rank) is None  # already there
    assert lower_effort("medium", "high", rank) is None  # never raised
    assert lower_effort("turbo", "low", rank) is None  # unknown scale value: left alone
    assert lower_effort("high", "minimal", rank) is None  # not on this scale


def test_openai_scale_has_minimal_and_none_below_it() -> None:
    assert lower_effort("low", "minimal", OPENAI_EFFORT_RANK) == "minimal"
    assert lower_effort("none", "minimal", OPENAI_EFFORT_RANK) is None


def test_legacy_budget_is_clamped_only_for_enabled_thinking_above_the_floor() -> None:
    assert clamp_thinking_budget("enabled", 16000) == 1024
    assert clamp_thinking_budget("enabled", 1024) is None
    assert clamp_thinking_budget("enabled", 800) is None
    assert clamp_thinking_budget("adaptive", 16000) is None
    assert clamp_thinking_budget("disabled", 16000) is None
    assert clamp_thinking_budget(None, None) is None


@pytest.mark.parametrize(
    ("model", "ok"),
    [
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("gpt-5.1-codex", True),
        ("openai/gpt-5", True),
        ("gpt-4.1", False),
        ("gpt-50", False),
        ("o3", False),
        (None, False),
    ],
)
def test_only_the_gpt5_family_may_get_a_created_verbosity(model: str | None, ok: bool) -> None:
    assert can_create_verbosity(model) is ok


def test_budget_clamp_starts_only_when_cold_and_is_held_only_across_mechanical_turns() -> None:
    mech, ask = TurnKind.MECHANICAL_CONTINUATION, TurnKind.NEW_ASK
    assert budget_clamp_allowed(mech, cache_cold=True, clamp_held=False)
    assert budget_clamp_allowed(mech, cache_cold=False, clamp_held=True)
    assert not budget_clamp_allowed(mech, cache_cold=False, clamp_held=False)
    assert not budget_clamp_allowed(ask, cache_cold=True, clamp_held=True)
    assert not budget_clamp_allowed(TurnKind.ERROR_CONTINUATION, True, True)


def test_only_mechanical_continuations_get_a_plan() -> None:
    fields = EffortFields(effort="high", thinking_type="enabled", thinking_budget=8000)
    for kind in (TurnKind.NEW_ASK, TurnKind.ERROR_CONTINUATION, TurnKind.UNKNOWN):
        plan = plan_effort(
            kind, fields, protocol="anthropic", model="m", target="low", clamp_budget=True
        )
        assert plan.empty
    plan = plan_effort(
        TurnKind.MECHANICAL_CONTINUATION,
        fields,
        protocol="anthropic",
        model="claude-sonnet-4-5",
        target="minimal",
        clamp_budget=True,
    )
    assert (plan.effort, plan.thinking_budget, plan.verbosity) == ("low", 1024, None)


def test_openai_plan_creates_verbosity_for_gpt5_only() -> None:
    mech = TurnKind.MECHANICAL_CONTINUATION
    bare = EffortFields(verbosity_creatable=True)
    gpt5 = plan_effort(
        mech, bare, protocol="openai_responses", model="gpt-5", target="low", clamp_budget=False
    )
    gpt4 = plan_effort(
        mech, bare, protocol="openai_responses", model="gpt-4.1", target="low", clamp_budget=False
    )
    assert gpt5.verbosity == "low" and gpt5.effort is None
    assert gpt4.empty
    sent = EffortFields(effort="high", verbosity="high", verbosity_creatable=True)
    plan = plan_effort(
        mech, sent, protocol="openai_chat", model="gpt-4.1", target="minimal", clamp_budget=True
    )
    assert (plan.effort, plan.verbosity, plan.thinking_budget) == ("minimal", "low", None)


def test_cache_guard_fires_only_on_a_miss_after_a_parameter_change_within_ttl() -> None:
    assert params_broke_cache(20_000, 2_000, params_changed=True, within_ttl=True)
    assert params_broke_cache(4_000, 2_900, params_changed=True, within_ttl=True)
    assert not params_broke_cache(20_000, 19_500, params_changed=True, within_ttl=True)
    assert not params_broke_cache(20_000, 21_000, params_changed=True, within_ttl=True)
    assert not params_broke_cache(20_000, 0, params_changed=False, within_ttl=True)
    assert not params_broke_cache(20_000, 0, params_changed=True, within_ttl=False)
    assert not params_broke_cache(900, 0, params_changed=True, within_ttl=True)
