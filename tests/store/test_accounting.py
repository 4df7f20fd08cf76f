from __future__ import annotations

from pathlib import Path

import pytest

from ember.errors import StorageError
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord, exchanges, session_totals
from ember.store.registry import Storage


def _rec(session: str, cost: float | None, out: int = 10) -> ExchangeRecord:
    return ExchangeRecord(
        ts=1.0,
        session_id=session,
        project="/p",
        protocol="anthropic",
        model="m",
        status=200,
        outcome="ok",
        stream=True,
        usage=Usage(input_tokens=5, cache_read_tokens=100, output_tokens=out),
        cost_usd=cost,
        price_snapshot="s",
        latency_ms=1.0,
        ttfb_ms=0.5,
    )


def test_session_totals_are_summed_and_null_cost_is_contagious(tmp_path: Path) -> None:
    path = tmp_path / "p" / "ember.db"
    storage = Storage(tmp_path)
    db = storage.database(path)
    for rec in (_rec("a", 0.01), _rec("a", 0.02, out=20), _rec("b", 0.01), _rec("b", None)):
        db.submit(rec.insert)
    storage.close()
    totals = {r["session_id"]: r for r in session_totals(path)}
    assert totals["a"]["requests"] == 2 and totals["a"]["output_tokens"] == 30
    assert abs(totals["a"]["cost_usd"] - 0.03) < 1e-12
    assert totals["b"]["cost_usd"] is None
    assert totals["b"]["unpriced_requests"] == 1 and totals["b"]["priced_cost_usd"] == 0.01
    assert len(exchanges(path, "a")) == 2


def test_a_database_that_cannot_be_created_does_not_stop_the_others(tmp_path: Path) -> None:
    """The row for the file that cannot be created is held (it may come back: the folder
    fixed), the other file is written; at shutdown the held row is dropped and counted."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    storage = Storage(tmp_path)
    bad_db = storage.database(blocker / "ember.db")
    bad = bad_db.submit(_rec("a", 0.0).insert)
    good = storage.database(tmp_path / "ok.db").submit(_rec("a", 0.0).insert)
    good.result(10)
    with pytest.raises(StorageError):  # a caller that waits is told at once, not held
        bad_db.write(_rec("b", 0.0).insert)
    assert not bad.done() and bad_db.health.state == "unwritable"
    assert bad_db.health.held == 1
    storage.close()
    with pytest.raises(StorageError):
        bad.result(0)
    assert bad_db.health.dropped == 2 and dict(bad_db.health.dropped_by) == {"other": 2}
    assert len(exchanges(tmp_path / "ok.db")) == 1


def test_missing_database_reads_as_empty(tmp_path: Path) -> None:
    assert session_totals(tmp_path / "none.db") == []
