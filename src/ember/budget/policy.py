"""Where a project stands against its limits (pure: the stage, the dashboard and the banner
all decide with these)."""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from typing import Literal

from ember.budget.settings import BudgetSettings

State = Literal["ok", "warn", "over"]
Period = Literal["day", "month"]
_DAY = 86_400


@dataclass(frozen=True)
class Limits:
    daily_usd: float | None
    monthly_usd: float | None

    @property
    def any(self) -> bool:
        return self.daily_usd is not None or self.monthly_usd is not None


def limits_for(options: BudgetSettings, identity: str | None) -> Limits:
    """The project's limits: its own where ``budget_projects`` names it, else the global."""
    own = options.budget_projects.get(identity or "")
    daily = own.daily_usd if own is not None and own.daily_usd is not None else None
    monthly = own.monthly_usd if own is not None and own.monthly_usd is not None else None
    return Limits(
        daily if daily is not None else options.budget_daily_usd,
        monthly if monthly is not None else options.budget_monthly_usd,
    )


def day_start(now: float) -> float:
    return float(int(now // _DAY) * _DAY)


def month_start(now: float) -> float:
    t = time.gmtime(now)
    return float(calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)))


def next_month(now: float) -> float:
    t = time.gmtime(now)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return float(calendar.timegm((year, month, 1, 0, 0, 0)))


@dataclass(frozen=True)
class Standing:
    """One limit of one project now: what was spent of it, and when the period resets."""

    period: Period
    limit_usd: float
    spent_usd: float
    state: State
    resets_at: float

    @property
    def setting(self) -> str:
        return "budget_daily_usd" if self.period == "day" else "budget_monthly_usd"

    def message(self, identity: str | None) -> str:
        share = self.spent_usd / self.limit_usd if self.limit_usd else 1.0
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.resets_at))
        return (
            f"ember: project {identity or '(unresolved)'} has spent {usd(self.spent_usd)} "
            f"({share:.0%}) of its {'daily' if self.period == 'day' else 'monthly'} limit of "
            f"{usd(self.limit_usd)} ({self.setting}); it resets at {when}. Raise the limit "
            "in ember's config, or set budget_refuse = false to only warn."
        )


def usd(value: float) -> str:
    """Dollars as a person reads them: cents from a dollar up, four places below."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def standings(
    limits: Limits, spent_day: float, spent_month: float, warn_at: float, now: float
) -> list[Standing]:
    """Each set limit's standing, the daily one first."""
    out = []
    for period, limit, spent, resets in (
        ("day", limits.daily_usd, spent_day, day_start(now) + _DAY),
        ("month", limits.monthly_usd, spent_month, next_month(now)),
    ):
        if limit is None:
            continue
        state: State = "over" if spent >= limit else "warn" if spent >= limit * warn_at else "ok"
        out.append(Standing(period, limit, spent, state, resets))  # type: ignore[arg-type]
    return out


def worst(found: list[Standing]) -> Standing | None:
    """The limit that matters most: one that is over (the one resetting last), else warned."""
    rank = {"over": 2, "warn": 1, "ok": 0}
    ranked = sorted(found, key=lambda s: (rank[s.state], s.resets_at), reverse=True)
    return ranked[0] if ranked and ranked[0].state != "ok" else None
