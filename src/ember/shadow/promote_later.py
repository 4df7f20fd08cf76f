"""A run's facts whose promotion met a store gone away: stored once the store is back.

A run records its proposals (its one write) and then stores the valid ones as memories and
links each proposal to its memory: more writes, a moment later. A store that goes away in
between (a PostgreSQL server stopped, a disk filled) left the run completed — its messages
read, never to be read again — and its facts never memories, with nothing said and nothing
to retry them: 3 of 80 facts in a soak with two server stops.

Invariants, and what each prevents:

- The retry is detached from the session's run: a new message of the session cancels the
  run (``ShadowService.cancel``), and it must not cancel the facts the run already found.
- It tries again only once the database says it is back (its health ok, nothing held): no
  write is refused over and over, counted each time.
- Storing again stores nothing twice: the memory library returns a fact already current in
  the same scope (``add_many``'s dedup), so an attempt whose memories were stored and whose
  link was refused links them now.
- Bounded by ``WAIT_SECONDS``; a stop cancels it (the proposals stay, valid and unlinked,
  as before). Either is said in one info line, never as a warning per fact.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ember.errors import StorageUnavailable
from ember.store.database import Database

log = logging.getLogger(__name__)

#: How long a run's facts wait for their store to come back.
WAIT_SECONDS = 600.0
#: How often the database's health is looked at meanwhile.
POLL_SECONDS = 0.5


def store_down(exc: BaseException) -> bool:
    """``exc`` is the store being off (``StorageUnavailable``, maybe wrapped by the memory
    library): the database said so itself, once."""
    return isinstance(exc, StorageUnavailable) or isinstance(exc.__cause__, StorageUnavailable)


async def when_back(db: Database, attempt: Callable[[], Awaitable[object]], what: str) -> bool:
    """Run ``attempt`` once ``db`` is back, again while it meets the store gone away, until
    ``WAIT_SECONDS`` passed; whether it succeeded. ``what`` names the facts in the log."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        health = db.health
        if not health.ok or health.held:
            continue
        try:
            await attempt()
        except Exception as exc:
            if store_down(exc):
                continue
            log.exception("storing %s as memories failed", what)
            return False
        log.info("shadow: %s stored as memories once the store was back", what)
        return True
    log.info("shadow: %s were not stored as memories: the store stayed away", what)
    return False
