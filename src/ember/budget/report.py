"""Where a project stands against its limits, as ``ember stats`` and the dashboard say it:
what was spent, what requests in flight hold (their reservations) and each set limit."""

from __future__ import annotations

import time
from typing import Any

from ember.budget import held, policy
from ember.budget.settings import BudgetSettings
from ember.store.database import Database


def read(db: Database, options: BudgetSettings, identity: str | None) -> dict[str, Any] | None:
    """The project's standing (``described``), or None when no limit applies to it."""
    if not policy.limits_for(options, identity).any:
        return None
    now = time.time()
    return described(options, identity, db.read(lambda c: held.standing(c, now)), now)


def described(
    options: BudgetSettings, identity: str | None, found: policy.Spend, now: float
) -> dict[str, Any]:
    """The standing as JSON: the dashboard's panel and ``ember stats --json``'s ``budget``."""
    limits = policy.limits_for(options, identity)
    return {
        "refuse": options.budget_refuse,
        "warn_at": options.budget_warn_at,
        "spent_day_usd": found.day,
        "spent_month_usd": found.month,
        "reserved_day_usd": found.reserved_day,
        "reserved_month_usd": found.reserved_month,
        "in_flight": found.in_flight,
        "limits": [
            {
                "period": s.period,
                "limit_usd": s.limit_usd,
                "spent_usd": s.spent_usd,
                "reserved_usd": s.reserved_usd,
                "state": s.state,
                "resets_at": s.resets_at,
                "setting": s.setting,
            }
            for s in policy.standings(limits, found, options.budget_warn_at, now)
        ],
    }


def sentences(standing: dict[str, Any]) -> list[str]:
    """One line per limit: spent, held by requests in flight, the limit, what happens past it."""
    out = []
    for lim in standing["limits"]:
        taken = lim["spent_usd"] + lim["reserved_usd"]
        share = taken / lim["limit_usd"] if lim["limit_usd"] else 1.0
        flying = (
            f", {policy.usd(lim['reserved_usd'])} held by "
            f"{_requests(standing['in_flight'])} in flight,"
            if lim["reserved_usd"] > 0
            else ""
        )
        if lim["state"] != "over":
            where = f"{share:.0%}"
        elif standing["refuse"]:
            where = "reached: new requests are refused"
        else:
            where = "reached: warning only (budget_refuse = false)"
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(lim["resets_at"]))
        kind = "daily" if lim["period"] == "day" else "monthly"
        out.append(
            f"budget: {policy.usd(lim['spent_usd'])} spent{flying} of the {kind} limit of "
            f"{policy.usd(lim['limit_usd'])} ({lim['setting']}): {where}; resets {when}"
        )
    return out


def _requests(n: int) -> str:
    return "1 request" if n == 1 else f"{n} requests"
