"""What ``ember learn``'s model call cost, recorded apart from the user's own sessions.

The analysis is a call ember makes on its own, so it is accounted with origin ``learn``
(DESIGN.md, "Spend by origin") in the global ``$EMBER_HOME/stats.db`` (with ``store_url``,
the PostgreSQL store's ``ember_home``): ``ember stats`` sums a
session from its ``client`` rows only, so this row can never inflate what a user's session
cost, and ``spend_by_origin`` still shows what learning spent. The cost is at list prices
(``ember.prices``); a model without a price has cost None, never a made-up $0.

Only a call that was answered is recorded (an answer is billed even when it held no usable
JSON); an agent CLI reports no usage to ember, so a ``--cli`` run records nothing.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from ember.learn.analyze import Answer
from ember.prices import PriceTable
from ember.protocols import ANTHROPIC, BY_FAMILY
from ember.store.accounting import ExchangeRecord
from ember.store.registry import Storage

__all__ = ["ORIGIN", "learn_record", "record_learn_spend"]

ORIGIN = "learn"


def learn_record(
    answer: Answer, protocol: str, prices: PriceTable, started: float, seconds: float
) -> ExchangeRecord:
    """The accounting row of one analysis call (pure). Each run is its own ``learn-*``
    session id, so runs stay apart in ``spend_by_origin``."""
    session_id = f"learn-{uuid.uuid4().hex[:16]}"
    return ExchangeRecord(
        ts=started or time.time(),
        session_id=session_id,
        project=None,
        protocol=BY_FAMILY.get(protocol, ANTHROPIC).name,
        model=answer.model,
        status=200,
        outcome="ok",
        stream=False,
        usage=answer.usage,
        cost_usd=prices.cost(answer.model, answer.usage),
        price_snapshot=prices.snapshot,
        latency_ms=seconds * 1000,
        ttfb_ms=None,
        thread=session_id,
        thread_kind=ORIGIN,
        origin=ORIGIN,
    )


def record_learn_spend(home: Path, record: ExchangeRecord, store_url: str | None = None) -> str:
    """Write ``record`` into ``home``'s stats database through its owner, committed before
    this returns (the CLI exits right after); with ``store_url``, into the PostgreSQL
    store's ``ember_home``, where ``ember stats`` reads it then (a row in a stats.db the
    store's readers never open would be spend nobody sees). Returns where it went."""
    # A one-shot command: a refused write is an error to report now, not one to hold for a
    # file (or a server) that may come back after the command has exited.
    storage = Storage(home, vec=False, hold_writes=0, store_url=store_url)
    try:
        db = storage.stats()
        db.submit(record.insert, label=f"accounting:{ORIGIN}").result(30)
        return db.where
    finally:
        storage.close()
