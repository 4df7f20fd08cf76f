"""The budget stage: first in the pipeline, it checks the project's spend against its limits.

- Under a limit's warning share: nothing happens (and a project without limits costs nothing:
  no read at all).
- Past the warning share, or over a limit without ``budget_refuse``: one warning in the log per
  project, limit and level, and the dashboard shows it; the request goes on.
- Over a limit with ``budget_refuse``: the request is answered by ember (``Exchange.refusal``:
  a 429 in the provider's shape, saying which limit and when it resets) and never forwarded.

A project's spend is read at most every ``FRESH_SECONDS`` (an indexed sum over hourly rows,
in a worker thread); a failed read lets the request through (fail open: a budget must not turn
a database hiccup into refused work), said once in the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from ember.budget import policy
from ember.budget.settings import BudgetSettings
from ember.budget.spend import spent
from ember.config import Settings
from ember.errors import StorageError
from ember.exchange import Exchange, Outcome, Refusal, Services, Stage
from ember.store.registry import Storage

log = logging.getLogger(__name__)

#: How old a project's spend may be when a request is checked (seconds): a limit may be passed
#: by the requests of these few seconds, never by more.
FRESH_SECONDS = 2.0


class BudgetStage(Stage):
    name = "budget"

    def __init__(
        self, settings: Settings, storage: Storage, clock: Callable[[], float] = time.time
    ) -> None:
        self.options = settings.section(BudgetSettings)
        self.home = settings.home
        self.storage = storage
        self.clock = clock
        self.prices = settings.price_table()
        self._spent: dict[Path, tuple[float, float, float]] = {}  # path -> (read at, day, month)
        self._warned: set[tuple[str, str, str, float]] = set()
        self._read_failed = False
        self._schemas: set[Path] = set()  # projects whose PostgreSQL schema was seen

    async def start(self, services: Services) -> None:
        self.storage = services.storage

    async def on_request(self, ex: Exchange) -> None:
        identity = ex.project.identity if ex.project is not None else None
        limits = policy.limits_for(self.options, identity)
        if not limits.any or ex.project is None:
            return
        found = await self._spend(ex.project.db_path(self.home))
        if found is None:
            return
        now = self.clock()
        standing = policy.worst(
            policy.standings(limits, found[0], found[1], self.options.budget_warn_at, now)
        )
        if standing is None:
            return
        self._warn_once(identity or "", standing)
        if standing.state == "over" and self.options.budget_refuse:
            ex.refusal = Refusal(429, standing.message(identity), standing.resets_at - now)

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        """The answer's cost joins the project's spend at once, so the next request is checked
        against it (the row itself is written by accounting a moment later)."""
        if ex.project is None or outcome.message is None:
            return
        path = ex.project.db_path(self.home)
        kept = self._spent.get(path)
        msg = outcome.message
        cost = self.prices.cost(msg.model or ex.model, msg.usage)
        if kept is not None and cost:
            self._spent[path] = (kept[0], kept[1] + cost, kept[2] + cost)

    async def _spend(self, path: Path) -> tuple[float, float] | None:
        """(day, month) spend of the project. Spend only grows within a period, so a fresh
        read never lowers what the answers already added: the rows of the last answers may
        still be on their way to the file, and a limit must not be passed because of that."""
        now = self.clock()
        kept = self._spent.get(path)
        if kept is not None and now - kept[0] < FRESH_SECONDS:
            return kept[1], kept[2]
        try:
            if await self._has_data(path):
                day, month = await self.storage.database(path).aread(lambda c: spent(c, now))
            else:
                day = month = 0.0  # a new project: nothing spent (its first answers add up)
        except StorageError as exc:
            if not self._read_failed:
                self._read_failed = True
                log.warning("budget: cannot read the spend of %s (%s); requests go on", path, exc)
            return None
        if kept is not None:
            if policy.day_start(kept[0]) == policy.day_start(now):
                day = max(day, kept[1])
            if policy.month_start(kept[0]) == policy.month_start(now):
                month = max(month, kept[2])
        self._spent[path] = (now, day, month)
        return day, month

    async def _has_data(self, path: Path) -> bool:
        """Whether the project has a database to read: its file, or on a PostgreSQL store its
        schema (a project's file never exists there: every project read as having spent
        nothing, and no limit ever held). A schema seen once is remembered: schemas are not
        dropped under a running proxy, and the check costs a round trip."""
        if not self.storage.postgres:
            return path.is_file()
        if path in self._schemas:
            return True
        found = await asyncio.to_thread(self.storage.holds, path)
        if found:
            self._schemas.add(path)
        return found

    def _warn_once(self, identity: str, s: policy.Standing) -> None:
        key = (identity, s.period, s.state, s.resets_at)
        if key in self._warned:
            return
        self._warned.add(key)
        refusing = s.state == "over" and self.options.budget_refuse
        log.warning("%s%s", s.message(identity), " Refusing its requests." if refusing else "")
