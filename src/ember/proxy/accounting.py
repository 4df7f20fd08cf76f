"""The accounting stage: one row per exchange in the project's database.

Where rows go: the project's ``ember.db`` when the request names a project, else the global
``$EMBER_HOME/stats.db`` — accounting holds token counts and costs, not content, so keeping it
for unresolved requests leaks nothing across projects. The row is queued on the database's
writer and never awaited: the answer is already with the client.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

from ember.errors import StorageError
from ember.prices import PriceTable
from ember.proxy.pipeline import Exchange, Outcome, Stage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.registry import Storage

log = logging.getLogger(__name__)


class AccountingStage(Stage):
    name = "accounting"

    def __init__(self, storage: Storage, prices: PriceTable) -> None:
        self.storage = storage
        self.prices = prices

    def database(self, ex: Exchange) -> Database:
        if ex.project is not None:
            return self.storage.database(ex.project.db_path(self.storage.home))
        return self.storage.stats()

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        msg = outcome.message
        usage = msg.usage if msg is not None else None
        model = (msg.model if msg is not None and msg.model else None) or ex.model
        cost = self.prices.cost(model, usage)
        refused = outcome.status >= 400 and outcome.kind != "stream_error"
        if cost is None and usage is None and refused and self.prices.lookup(model):
            cost = 0.0  # the provider refused before generating: nothing billed
        # A stream that failed midway may have generated (and billed) tokens it never
        # reported: without usage its cost stays unknown rather than a made-up $0.
        record = ExchangeRecord(
            ts=ex.wall_started,
            session_id=ex.session_id,
            project=ex.project.identity if ex.project else None,
            protocol=ex.adapter.name,
            model=model,
            status=outcome.status,
            outcome=outcome.kind,
            stream=outcome.streamed,
            usage=usage,
            cost_usd=cost,
            price_snapshot=self.prices.snapshot,
            latency_ms=outcome.latency_ms,
            ttfb_ms=outcome.ttfb_ms,
        )
        done = self.database(ex).submit(record.insert, label="accounting")
        done.add_done_callback(_log_failure)


def _log_failure(done: Future[None]) -> None:
    exc = done.exception()
    if exc is not None and not isinstance(exc, StorageError):
        # StorageError is reported once by the database's health; anything else is a bug.
        log.error("accounting row not written: %r", exc)
