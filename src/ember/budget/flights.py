"""The reservations of one proxy's requests still running, kept alive while they run.

A reservation carries an expiry (``held.Reservation.expires_at``) so that one left by a proxy
that was killed stops holding its project's room by itself. A request may run far longer than
that expiry (a long answer streams for minutes): its proxy pushes the expiry forward every
``ttl / 3`` for as long as the request runs, in one write per project. Past ``MAX_FLIGHT``
a reservation is no longer renewed: an exchange that broke off inside ember never reaches the
response stages that would say it ended, and its room must come back some day.

Each round also deletes the reservations that no longer count in the projects this proxy
reserved in (``held.sweep``): they are left out of every sum already; this keeps the table
small.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from ember.budget import held
from ember.errors import StorageError
from ember.store.driver import Connection
from ember.store.registry import Storage

log = logging.getLogger(__name__)

#: How long a reservation holds without being renewed (seconds): a killed proxy's requests
#: hold their room this long at most.
TTL_SECONDS = 60.0
#: A request's reservation is renewed for this long at most (seconds).
MAX_FLIGHT = 3600.0


class Flights:
    """Reservation ids of requests in flight, by project database, and what the answered ones
    cost (event loop only).

    Between an answer's last byte and the response stages that price it, an agent already
    sends its next turn: ``answered`` notes the request then, and the next reservation of the
    project waits for it to be priced (``landings``, a few milliseconds) and writes what it
    cost over its estimate (``settled``), in the same transaction."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._flying: dict[Path, dict[str, float]] = {}
        self._touched: set[Path] = set()
        self._landing: dict[Path, dict[str, asyncio.Event]] = {}
        self._settled: dict[Path, dict[str, float]] = {}

    def take_off(self, path: Path, reservation: str) -> None:
        self._flying.setdefault(path, {})[reservation] = self._clock()
        self._touched.add(path)

    def answered(self, path: Path, reservation: str) -> None:
        """The client has (or is about to have) the whole answer; its cost is not known yet."""
        self._landing.setdefault(path, {})[reservation] = asyncio.Event()

    def land(self, path: Path, reservation: str, cost: float | None = None) -> None:
        """The request ended: no longer renewed; ``cost``: what it cost, when known."""
        flying = self._flying.get(path)
        if flying is not None:
            flying.pop(reservation, None)
            if not flying:
                del self._flying[path]
        if cost is not None:
            self._settled.setdefault(path, {})[reservation] = cost
        landing = self._landing.get(path, {})
        event = landing.pop(reservation, None)
        if event is not None:
            event.set()
        if not landing:
            self._landing.pop(path, None)

    async def landings(self, path: Path, timeout: float) -> None:
        """Wait, ``timeout`` at most, until every answered request of ``path`` is priced;
        those still unpriced then are not waited for again (their response stages never
        ran: the exchange broke off inside ember)."""
        landing = self._landing.get(path, {})
        waits = {rid: asyncio.ensure_future(e.wait()) for rid, e in landing.items()}
        if not waits:
            return
        _, late = await asyncio.wait(waits.values(), timeout=timeout)
        for rid, wait in waits.items():
            if wait in late:
                wait.cancel()
                landing.pop(rid, None)

    def settled(self, path: Path) -> dict[str, float]:
        """What the answered requests of ``path`` cost, by reservation, handed over once."""
        return self._settled.pop(path, {})

    def in_flight(self) -> dict[Path, list[str]]:
        """The reservations to renew, by project; those in flight past ``MAX_FLIGHT`` are
        forgotten."""
        now = self._clock()
        out: dict[Path, list[str]] = {}
        for path, flying in list(self._flying.items()):
            for rid, since in list(flying.items()):
                if now - since > MAX_FLIGHT:
                    self.land(path, rid)
            if path in self._flying:
                out[path] = list(self._flying[path])
        return out

    def touched(self) -> set[Path]:
        """The projects reserved in since the last call."""
        found, self._touched = self._touched, set()
        return found


async def keep_alive(
    flights: Flights, storage: Storage, ttl: float, clock: Callable[[], float] = time.time
) -> None:
    """Renew this proxy's reservations and sweep its projects every ``ttl / 3``, until
    cancelled. A write that fails is said once; the next round tries again."""
    failed = False
    while True:
        await asyncio.sleep(ttl / 3)
        flying = flights.in_flight()
        for path in flights.touched() | set(flying):
            job = _round(flying.get(path, []), clock(), ttl)
            try:
                await storage.database(path).awrite(job, label="budget")
            except StorageError as exc:
                if not failed:
                    failed = True
                    log.warning("budget: cannot renew the reservations in %s (%s)", path, exc)


def _round(ids: list[str], now: float, ttl: float) -> Callable[[Connection], None]:
    def run(conn: Connection) -> None:
        held.extend(conn, ids, now + ttl)
        held.sweep(conn, now)

    return run
