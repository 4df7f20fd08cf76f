"""The proxy's daily prune (``store_retention_days``, ``retention``).

The stage does nothing per request: it starts a background task that waits ``FIRST_SECONDS``
after start-up, then prunes every database of the store (``prune.prune_database``, what
``ember store prune`` does), and again every ``EVERY_SECONDS``.

Invariants, and what each prevents:

- Each database is pruned by the owner the proxy already has (one writer per database in the
  process: a second one on the same file would race it), as one exclusive write job.
- A failure is logged once per database and run, and never reaches a request; the next day
  tries again.
- Several proxies on one PostgreSQL store each prune: the second finds nothing left to do
  (the deletes are idempotent and serialized by the schema's writer lock).
- A schema whose name is not the one the proxy would give its folder is left alone: opening
  the folder's owner would create an empty schema under the other name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ember.exchange import Stage
from ember.store.prune import DAY, cutoff_for, prune_database

if TYPE_CHECKING:
    from ember.exchange import Services
    from ember.store.registry import Storage

log = logging.getLogger(__name__)

#: The first prune comes this long after start-up (never in a start-up's way)...
FIRST_SECONDS = 600.0
#: ...and then one a day.
EVERY_SECONDS = float(DAY)


class RetentionStage(Stage):
    name = "retention"

    def __init__(self, days: float, storage: Storage) -> None:
        self.days, self.storage = days, storage
        #: when the last run ended (epoch seconds), and what it deleted, by table
        self.last_run: float | None = None
        self.last_rows: dict[str, int] = {}

    async def start(self, services: Services) -> None:
        services.tasks.spawn(self._loop(), name="retention")

    async def _loop(self) -> None:
        await asyncio.sleep(FIRST_SECONDS)
        while True:
            await self.run_once()
            await asyncio.sleep(EVERY_SECONDS)

    async def run_once(self, now: float | None = None) -> dict[str, int]:
        """Prune every database once; rows deleted, by table (summed over databases)."""
        from ember.store import pruning
        from ember.store.pg.names import schema_name
        from ember.store.schema import PROJECT, STATS

        cutoff = cutoff_for(time.time() if now is None else now, self.days)
        home, url = self.storage.home, self.storage.store_url
        try:
            units = await asyncio.to_thread(pruning.units, home, url)
        except Exception as exc:
            log.warning("retention: cannot list the store's databases now (%s)", exc)
            return {}
        total: dict[str, int] = {}
        for unit in units:
            path = home / unit.rel
            if url is not None and unit.schema != schema_name(home, path):
                continue
            db = self.storage.database(path, STATS if unit.kind == "stats" else PROJECT)
            try:
                rows = await db.awrite(
                    lambda c: prune_database(c, cutoff), exclusive=True, label="retention"
                )
            except Exception as exc:
                log.warning(
                    "retention: %s was not pruned (%s); tried again tomorrow", db.where, exc
                )
                continue
            for table, n in rows.items():
                total[table] = total.get(table, 0) + n
        self.last_run, self.last_rows = time.time(), total
        if any(total.values()):
            said = ", ".join(f"{n} {t}" for t, n in sorted(total.items()) if n)
            log.info("retention: pruned rows older than %g days: %s", self.days, said)
        return total
