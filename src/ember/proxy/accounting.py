"""The accounting stage: one row per exchange in the project's database.

Where rows go: the project's ``ember.db`` when the request names a project, else the global
``$EMBER_HOME/stats.db`` — accounting holds token counts and costs, not content, so keeping it
for unresolved requests leaks nothing across projects.
"""

from __future__ import annotations

from pathlib import Path

from ember.prices import PriceTable
from ember.proxy.pipeline import Exchange, Outcome, Stage
from ember.store.accounting import AccountingWriter, ExchangeRecord


def stats_db_path(home: Path) -> Path:
    return home / "stats.db"


class AccountingStage(Stage):
    name = "accounting"

    def __init__(self, writer: AccountingWriter, prices: PriceTable, home: Path) -> None:
        self.writer = writer
        self.prices = prices
        self.home = home

    def db_path(self, ex: Exchange) -> Path:
        return ex.project.db_path(self.home) if ex.project else stats_db_path(self.home)

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
        self.writer.submit(self.db_path(ex), record)

    async def close(self) -> None:
        self.writer.close()
