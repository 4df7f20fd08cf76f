"""The budget stage: first in the pipeline, it checks the project's spend against its limits.

- Under a limit's warning share: nothing happens (and a project without limits costs nothing:
  no read at all).
- Past the warning share, or over a limit without ``budget_refuse``: one warning in the log per
  project, limit and level, and the dashboard shows it; the request goes on.
- Over a limit with ``budget_refuse``: the request is answered by ember (``Exchange.refusal``:
  a 429 in the provider's shape, saying which limit and when it resets) and never forwarded.

With ``budget_refuse`` a limit holds across every proxy sharing the store: each request is
admitted in one write transaction that reads the spend and what the requests in flight hold,
and holds its own estimate (``held``, ``estimate``) until its accounting row is written. A
limit is then passed by at most the cost of the last request admitted (plus what requests
in flight cost past their reservations). Without it nothing is refused, so nothing is held:
the spend is read at most every ``FRESH_SECONDS`` (an indexed sum over hourly rows, in a
worker thread), and the answers of this proxy are added as they come.

A failed read or reservation lets the request through (fail open: a budget must not turn a
database hiccup into refused work), said once in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ember.budget import estimate, held, policy
from ember.budget.flights import TTL_SECONDS, Flights, keep_alive
from ember.budget.settings import BudgetSettings
from ember.budget.spend import spent
from ember.config import Settings
from ember.errors import StorageError
from ember.exchange import Exchange, Outcome, Refusal, Services, Stage
from ember.store.registry import Storage

log = logging.getLogger(__name__)

#: How old a project's spend may be when a request is checked without ``budget_refuse``
#: (seconds): a warning may come these few seconds late.
FRESH_SECONDS = 2.0
#: How long a reservation waits for the answers this proxy just gave to be priced (seconds):
#: the response stages price an answer a few milliseconds after its last byte.
LANDING_SECONDS = 1.0
#: Bodies larger than this are estimated in a worker thread (a 400 KB agent turn is ~2 ms).
_BIG_BODY = 64 * 1024


class BudgetStage(Stage):
    name = "budget"

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        clock: Callable[[], float] = time.time,
        ttl: float = TTL_SECONDS,
    ) -> None:
        self.options = settings.section(BudgetSettings)
        self.home = settings.home
        self.accounting = settings.accounting
        self.storage = storage
        self.clock = clock
        self.ttl = ttl
        self.prices = settings.price_table()
        self.flights = Flights()
        self._keeper: asyncio.Task[None] | None = None
        self._spent: dict[Path, tuple[float, float, float]] = {}  # path -> (read at, day, month)
        self._warned: set[tuple[str, str, str, float]] = set()
        self._read_failed = False
        self._schemas: set[Path] = set()  # projects whose PostgreSQL schema was seen

    async def start(self, services: Services) -> None:
        self.storage = services.storage
        if self.options.budget_refuse:
            keeper = keep_alive(self.flights, self.storage, self.ttl, self.clock)
            self._keeper = services.tasks.spawn(keeper, name="budget-reservations")

    async def on_request(self, ex: Exchange) -> None:
        identity = ex.project.identity if ex.project is not None else None
        limits = policy.limits_for(self.options, identity)
        if not limits.any or ex.project is None:
            return
        path = ex.project.db_path(self.home)
        if self.options.budget_refuse:
            found = await self._reserve(ex, path, limits)
        else:
            found = await self._spend(path)
        if found is None:
            return
        now = self.clock()
        standing = policy.worst(policy.standings(limits, found, self.options.budget_warn_at, now))
        if standing is None:
            return
        self._warn_once(identity or "", standing)
        if standing.state == "over" and self.options.budget_refuse:
            # reached only by what is in flight: no date to wait for (room comes back sooner)
            wait = None if standing.held_only else standing.resets_at - now
            ex.refusal = Refusal(429, standing.message(identity), wait)

    def on_answered(self, ex: Exchange) -> None:
        reservation = ex.state.get(self.name)
        if isinstance(reservation, str) and ex.project is not None:
            self.flights.answered(ex.project.db_path(self.home), reservation)

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        """The request ended: its reservation is no longer renewed, and the project's next
        reservation sets it to what the answer cost (its accounting row, written next, then
        takes its place). Without ``budget_refuse``, the answer's cost joins the project's
        spend at once, so the next request is checked against it."""
        if ex.project is None:
            return
        path = ex.project.db_path(self.home)
        msg = outcome.message
        cost = self.prices.cost(msg.model or ex.model, msg.usage) if msg is not None else None
        reservation = ex.state.get(self.name)
        if isinstance(reservation, str):
            if not self.accounting:  # no row will take its place
                self.flights.land(path, reservation, 0.0)
                await self.storage.database(path).awrite(
                    lambda c: held.release(c, [reservation]), label="budget"
                )
            else:
                self.flights.land(path, reservation, cost)
            return
        kept = self._spent.get(path)
        if kept is not None and cost:
            self._spent[path] = (kept[0], kept[1] + cost, kept[2] + cost)

    async def close(self) -> None:
        """Stop renewing, and give back what requests that never ended still hold (their
        exchanges broke off inside ember): a proxy restarted at once need not wait for them
        to expire. Best effort: what is not given back expires."""
        if self._keeper is not None:
            self._keeper.cancel()
        for path, ids in self.flights.in_flight().items():
            with contextlib.suppress(StorageError):
                await self.storage.database(path).awrite(partial(held.release, ids=ids))

    async def _reserve(
        self, ex: Exchange, path: Path, limits: policy.Limits
    ) -> policy.Spend | None:
        """Admit the request and hold its room, in one write transaction of the store; the
        spend it was checked against (what it holds itself not included). Admitted: the
        exchange keeps its reservation's id (``Exchange.state``)."""
        body, model, fixed = ex.body, ex.model, self.options.budget_reserve_usd
        if len(ex.doc.raw) > _BIG_BODY:
            usd = await asyncio.to_thread(estimate.reservation_usd, body, model, self.prices, fixed)
        else:
            usd = estimate.reservation_usd(body, model, self.prices, fixed)
        await self.flights.landings(path, LANDING_SECONDS)
        settled = self.flights.settled(path)
        now = self.clock()
        rid = uuid.uuid4().hex
        ask = held.Reservation(rid, ex.session_id, ex.wall_started, usd, now + self.ttl)
        try:
            found = await self.storage.database(path).awrite(
                lambda c: held.reserve(c, ask, limits, now, settled), label="budget"
            )
        except StorageError as exc:
            self._failed(path, exc)
            return None
        if found.admitted:
            ex.state[self.name] = ask.id
            self.flights.take_off(path, ask.id)
        return found.spend

    async def _spend(self, path: Path) -> policy.Spend | None:
        """(day, month) spend of the project. Spend only grows within a period, so a fresh
        read never lowers what the answers already added: the rows of the last answers may
        still be on their way to the file, and a limit must not be passed because of that."""
        now = self.clock()
        kept = self._spent.get(path)
        if kept is not None and now - kept[0] < FRESH_SECONDS:
            return policy.Spend(kept[1], kept[2])
        try:
            if await self._has_data(path):
                day, month = await self.storage.database(path).aread(lambda c: spent(c, now))
            else:
                day = month = 0.0  # a new project: nothing spent (its first answers add up)
        except StorageError as exc:
            self._failed(path, exc)
            return None
        if kept is not None:
            if policy.day_start(kept[0]) == policy.day_start(now):
                day = max(day, kept[1])
            if policy.month_start(kept[0]) == policy.month_start(now):
                month = max(month, kept[2])
        self._spent[path] = (now, day, month)
        return policy.Spend(day, month)

    def _failed(self, path: Path, exc: StorageError) -> None:
        if not self._read_failed:
            self._read_failed = True
            log.warning("budget: cannot read the spend of %s (%s); requests go on", path, exc)

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
