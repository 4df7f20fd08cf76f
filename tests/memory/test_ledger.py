"""The injection ledger keeps a session's entries in memory and in the project database."""

from __future__ import annotations

from pathlib import Path

from ember.memory.ledger import InjectionLedger, LedgerEntry, message_digest


def test_ledger_reads_from_memory_after_the_first_load(tmp_path: Path) -> None:
    db = tmp_path / "p" / "ember.db"
    ledger = InjectionLedger()
    assert ledger.cached(db, "s") is None
    ledger.record(db, "s", LedgerEntry(0, "d", "block", ("id1",)))
    assert ledger.cached(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    fresh = InjectionLedger()  # a restarted proxy: loaded from the database once
    assert fresh.cached(db, "s") is None
    assert fresh.entries(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    assert fresh.cached(db, "s") is not None
    ledger.close()
    fresh.close()


def test_digest_depends_on_position_and_text() -> None:
    assert message_digest(0, "hi") == message_digest(0, "hi")
    assert message_digest(0, "hi") != message_digest(2, "hi")
    assert message_digest(0, "hi") != message_digest(0, "hi!")
