"""The budget on the dashboard (``Feature.views``): each project's limits and where it stands."""

from __future__ import annotations

import time
from typing import Any

from ember.budget import policy
from ember.budget.settings import BudgetSettings
from ember.budget.spend import spent
from ember.views import Query, Route, ViewContext


def standing(ctx: ViewContext, q: Query) -> dict[str, Any]:
    options = ctx.settings.section(BudgetSettings)
    name = q.needs_project()
    identity = q.params.get("identity") or None
    limits = policy.limits_for(options, identity)
    now = time.time()
    day, month = ctx.project_db(name).read(lambda c: spent(c, now))
    found = policy.standings(limits, day, month, options.budget_warn_at, now)
    return {
        "refuse": options.budget_refuse,
        "warn_at": options.budget_warn_at,
        "spent_day_usd": day,
        "spent_month_usd": month,
        "limits": [
            {
                "period": s.period,
                "limit_usd": s.limit_usd,
                "spent_usd": s.spent_usd,
                "state": s.state,
                "resets_at": s.resets_at,
                "setting": s.setting,
            }
            for s in found
        ],
    }


def views() -> tuple[Route, ...]:
    return (Route("GET", "standing", standing),)
