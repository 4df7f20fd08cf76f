"""Where a project stands against its limits: the decisions, on plain numbers."""

from __future__ import annotations

import calendar

import pytest

from ember.budget import policy
from ember.budget.settings import BudgetSettings, ProjectLimits

NOW = float(calendar.timegm((2026, 12, 31, 22, 30, 0)))


def test_a_named_project_has_its_own_limits_and_falls_back_per_limit() -> None:
    options = BudgetSettings(
        budget_daily_usd=10,
        budget_monthly_usd=100,
        budget_projects={"/w/api": ProjectLimits(daily_usd=2)},
    )
    assert policy.limits_for(options, "/w/api") == policy.Limits(2, 100)
    assert policy.limits_for(options, "/w/web") == policy.Limits(10, 100)
    assert not policy.limits_for(BudgetSettings(), "/w/api").any


@pytest.mark.parametrize(
    ("spent", "state"), [(7.9, "ok"), (8.0, "warn"), (9.99, "warn"), (10.0, "over"), (12, "over")]
)
def test_the_state_follows_the_share_spent(spent: float, state: str) -> None:
    [day] = policy.standings(policy.Limits(10, None), policy.Spend(spent, spent), 0.8, NOW)
    assert day.state == state


def test_periods_reset_at_utc_midnight_and_the_first_of_the_next_month() -> None:
    day, month = policy.standings(policy.Limits(1, 1), policy.Spend(0, 0), 0.8, NOW)
    assert day.resets_at == calendar.timegm((2027, 1, 1, 0, 0, 0))
    assert month.resets_at == calendar.timegm((2027, 1, 1, 0, 0, 0))  # December rolls over
    assert policy.month_start(NOW) == calendar.timegm((2026, 12, 1, 0, 0, 0))


def test_the_worst_limit_is_the_one_over_that_resets_last() -> None:
    mid_month = float(calendar.timegm((2026, 12, 5, 12, 0, 0)))
    found = policy.standings(policy.Limits(1, 5), policy.Spend(2, 6), 0.8, mid_month)
    worst = policy.worst(found)
    assert worst is not None and worst.period == "month"
    assert "budget_monthly_usd" in worst.message("/w/api") and "$6.00" in worst.message("/w/api")
    calm = policy.standings(policy.Limits(10, None), policy.Spend(1, 1), 0.8, NOW)
    assert policy.worst(calm) is None


def test_what_requests_in_flight_hold_counts_toward_the_limit() -> None:
    """A limit the requests in flight already fill is reached: the next request is refused,
    and the refusal says the room may come back before the reset (no retry date)."""
    [day] = policy.standings(policy.Limits(10, None), policy.Spend(6, 6, 4, 4, 3), 0.8, NOW)
    assert day.state == "over" and day.held_only and day.taken_usd == 10
    assert "holds $4.00 for requests in flight" in day.message("/w/api")
    assert "comes back as they are answered" in day.message("/w/api")
    [day] = policy.standings(policy.Limits(10, None), policy.Spend(6, 6, 2.5, 2.5, 1), 0.8, NOW)
    assert day.state == "warn"
    [day] = policy.standings(policy.Limits(10, None), policy.Spend(10, 10, 1, 1, 1), 0.8, NOW)
    assert day.state == "over" and not day.held_only


def test_budget_projects_reads_json_from_the_environment(tmp_path: object) -> None:
    from ember.config import load_settings

    settings = load_settings(env={"EMBER_BUDGET_PROJECTS": '{"/w/api": {"daily_usd": 3}}'})
    assert settings.section(BudgetSettings).budget_projects["/w/api"].daily_usd == 3
    from ember.errors import ConfigError

    with pytest.raises(ConfigError, match=r"EMBER_BUDGET_PROJECTS.*JSON object"):
        load_settings(env={"EMBER_BUDGET_PROJECTS": "api=3"})
