from __future__ import annotations

from pathlib import Path

from ember.protocols.base import Usage
from ember.store.accounting import AccountingWriter, ExchangeRecord, exchanges, session_totals


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
    db = tmp_path / "p" / "ember.db"
    w = AccountingWriter()
    w.submit(db, _rec("a", 0.01))
    w.submit(db, _rec("a", 0.02, out=20))
    w.submit(db, _rec("b", 0.01))
    w.submit(db, _rec("b", None))
    w.flush()
    w.close()
    totals = {r["session_id"]: r for r in session_totals(db)}
    assert totals["a"]["requests"] == 2 and totals["a"]["output_tokens"] == 30
    assert abs(totals["a"]["cost_usd"] - 0.03) < 1e-12
    assert totals["b"]["cost_usd"] is None
    assert totals["b"]["unpriced_requests"] == 1 and totals["b"]["priced_cost_usd"] == 0.01
    assert len(exchanges(db, "a")) == 2


def test_a_failed_write_is_dropped_without_killing_the_writer(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    w = AccountingWriter()
    w.submit(blocker / "ember.db", _rec("a", 0.0))  # parent is a file: cannot be created
    w.submit(tmp_path / "ok.db", _rec("a", 0.0))
    w.flush()
    w.close()
    assert len(exchanges(tmp_path / "ok.db")) == 1


def test_missing_database_reads_as_empty(tmp_path: Path) -> None:
    assert session_totals(tmp_path / "none.db") == []
