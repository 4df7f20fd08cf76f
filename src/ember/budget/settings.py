"""The budget's settings: a flat section (``ember.sections``): ``budget_daily_usd``,
``EMBER_BUDGET_REFUSE``... Limits apply to each project on its own; ``budget_projects`` sets
other limits for named projects (by the identity ``ember stats`` shows: a path or an id)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ProjectLimits(BaseModel):
    """One project's own limits; a limit left out is the global one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    daily_usd: float | None = Field(default=None, ge=0)
    monthly_usd: float | None = Field(default=None, ge=0)


class BudgetSettings(BaseModel):
    """What the budget reads (``settings.section(BudgetSettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: What one project may spend in a UTC day / calendar month (UTC), in dollars at the
    #: prices ember knows: every call counts, the client's and ember's own (shadow memory, the
    #: steward, memory tool rounds). Unset: no limit.
    budget_daily_usd: float | None = Field(default=None, ge=0)
    budget_monthly_usd: float | None = Field(default=None, ge=0)
    #: The share of a limit at which ember warns (in its log, once per period, and on the
    #: dashboard).
    budget_warn_at: float = Field(default=0.8, gt=0, le=1)
    #: Past a limit, refuse new requests of that project (the provider's own error shape, a
    #: 429 saying which limit, told not to retry) instead of only warning. Off by default: a
    #: limit should never stop someone's work unless they asked for that.
    budget_refuse: bool = False
    #: With ``budget_refuse``, what each request holds of its project's limits while it runs
    #: (dollars), so proxies sharing a store never admit the same room twice. Unset: an
    #: estimate of the request (``ember.budget.estimate``).
    budget_reserve_usd: float | None = Field(default=None, ge=0)
    #: Limits of named projects, e.g. ``[budget_projects."/home/me/api"]`` then
    #: ``daily_usd = 5``; in the environment, a JSON object.
    budget_projects: dict[str, ProjectLimits] = Field(default_factory=dict)

    @field_validator("budget_projects", mode="before")
    @classmethod
    def _from_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError(
                    'must be a JSON object, e.g. {"/home/me/api": {"daily_usd": 5}}'
                ) from None
        return value
