"""The budget on the dashboard (``Feature.views``): each project's limits and where it stands:
spent, held by requests in flight, and each limit (``report.described``)."""

from __future__ import annotations

import time
from typing import Any

from ember.budget import held
from ember.budget.report import described
from ember.budget.settings import BudgetSettings
from ember.views import Query, Route, ViewContext


def standing(ctx: ViewContext, q: Query) -> dict[str, Any]:
    options = ctx.settings.section(BudgetSettings)
    name = q.needs_project()
    identity = q.params.get("identity") or None
    now = time.time()
    found = ctx.project_db(name).read(lambda c: held.standing(c, now))
    return described(options, identity, found, now)


def views() -> tuple[Route, ...]:
    return (Route("GET", "standing", standing),)
