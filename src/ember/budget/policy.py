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
    """One limit of one project now: what was spent of it, what requests in flight hold of it
    (``reserved_usd``: their reservations, ``ember.budget.held``), and when the period
    resets. The state counts both: a limit the requests in flight already fill is reached."""

    period: Period
    limit_usd: float
    spent_usd: float
    state: State
    resets_at: float
    reserved_usd: float = 0.0

    @property
    def setting(self) -> str:
        return "budget_daily_usd" if self.period == "day" else "budget_monthly_usd"

    @property
    def taken_usd(self) -> float:
        """Spent, and held by requests in flight."""
        return self.spent_usd + self.reserved_usd

    def message(self, identity: str | None) -> str:
        share = self.taken_usd / self.limit_usd if self.limit_usd else 1.0
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.resets_at))
        flying = (
            f" and holds {usd(self.reserved_usd)} for requests in flight"
            if self.reserved_usd > 0
            else ""
        )
        held_only = (
            " Requests in flight hold the rest of it: what they do not spend comes back as "
            "they are answered."
            if self.held_only
            else ""
        )
        return (
            f"ember: project {identity or '(unresolved)'} has spent {usd(self.spent_usd)}"
            f"{flying} ({share:.0%}) of its {'daily' if self.period == 'day' else 'monthly'} "
            f"limit of {usd(self.limit_usd)} ({self.setting}); it resets at {when}.{held_only} "
            "Raise the limit in ember's config, or set budget_refuse = false to only warn."
        )

    @property
    def held_only(self) -> bool:
        """Reached only with what requests in flight hold: room may come back before the
        period resets."""
        return self.state == "over" and self.spent_usd < self.limit_usd


def usd(value: float) -> str:
    """Dollars as a person reads them: cents from a dollar up, four places below."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


@dataclass(frozen=True)
class Spend:
    """A project's spend of this UTC day and month, and what its requests in flight hold of
    each (their reservations: 0 where none are kept, a proxy that only warns)."""

    day: float
    month: float
    reserved_day: float = 0.0
    reserved_month: float = 0.0
    #: requests in flight this month, each holding a reservation
    in_flight: int = 0


def standings(limits: Limits, spend: Spend, warn_at: float, now: float) -> list[Standing]:
    """Each set limit's standing, the daily one first. A limit is ``over`` once what was spent
    and what requests in flight hold reach it: a request refused then is one that could pass
    it, and the one admitted last is the most a limit is ever passed by (its own cost)."""
    out = []
    for period, limit, spent, held, resets in (
        ("day", limits.daily_usd, spend.day, spend.reserved_day, day_start(now) + _DAY),
        ("month", limits.monthly_usd, spend.month, spend.reserved_month, next_month(now)),
    ):
        if limit is None:
            continue
        taken = spent + held
        state: State = "over" if taken >= limit else "warn" if taken >= limit * warn_at else "ok"
        out.append(Standing(period, limit, spent, state, resets, held))  # type: ignore[arg-type]
    return out


def worst(found: list[Standing]) -> Standing | None:
    """The limit that matters most: one that is over (the one resetting last), else warned."""
    rank = {"over": 2, "warn": 1, "ok": 0}
    ranked = sorted(found, key=lambda s: (rank[s.state], s.resets_at), reverse=True)
    return ranked[0] if ranked and ranked[0].state != "ok" else None
