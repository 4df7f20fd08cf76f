"""Spend limits as one feature: its stage (first in the pipeline: a refused request is never
edited or searched for), its settings, its dashboard view and what ``ember proxy`` says of it
when it starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ember.budget.settings import BudgetSettings
from ember.features import Composition, Feature, later

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.exchange import Stage


def _on(settings: Settings) -> bool:
    o = settings.section(BudgetSettings)
    named = any(
        p.daily_usd is not None or p.monthly_usd is not None for p in o.budget_projects.values()
    )
    return o.budget_daily_usd is not None or o.budget_monthly_usd is not None or named


def _stages(comp: Composition) -> Sequence[Stage]:
    if not _on(comp.settings):
        return ()
    from ember.budget.stage import BudgetStage

    return (BudgetStage(comp.settings, comp.storage),)


def _banner(settings: Settings) -> str | None:
    if not _on(settings):
        return None
    o = settings.section(BudgetSettings)
    caps = [
        f"${v:g}/{p}"
        for v, p in ((o.budget_daily_usd, "day"), (o.budget_monthly_usd, "month"))
        if v is not None
    ]
    named = f", {len(o.budget_projects)} project(s) with their own" if o.budget_projects else ""
    action = (
        "refuses requests past a limit" if o.budget_refuse else "warns only (budget_refuse = false)"
    )
    return f"budget: {' and '.join(caps) or 'no global limit'} per project{named}; {action}"


FEATURE = Feature(
    "budget",
    _stages,
    settings=BudgetSettings,
    flat_settings=True,
    banner=_banner,
    views=later("ember.budget.views:views"),
    project_migrations=later("ember.budget.schema:migrations"),
    postgres=True,
)
