"""The injection ledger keeps a session's entries in memory and in the project database."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.errors import StorageError
from ember.memory.ledger import InjectionLedger, LedgerEntry, message_digest
from ember.store.registry import Storage


async def test_ledger_reads_from_memory_after_the_first_load(tmp_path: Path) -> None:
    db = tmp_path / "p" / "ember.db"
    storage = Storage(tmp_path)
    ledger = InjectionLedger(storage)
    assert ledger.cached(db, "s") is None
    await ledger.record(db, "s", LedgerEntry(0, "d", "block", ("id1",)))
    assert ledger.cached(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    fresh = InjectionLedger(Storage(tmp_path))  # a restarted proxy: loaded from the file once
    assert fresh.cached(db, "s") is None
    assert await fresh.entries(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    assert fresh.cached(db, "s") is not None
    storage.close()


async def test_an_entry_that_could_not_be_stored_is_never_replayed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the project directory should be")
    db = blocker / "ember.db"
    ledger = InjectionLedger(Storage(tmp_path))
    with pytest.raises(StorageError):
        await ledger.record(db, "s", LedgerEntry(0, "d", "block"))
    assert ledger.cached(db, "s") is None


def test_digest_depends_on_position_and_text() -> None:
    assert message_digest(0, "hi") == message_digest(0, "hi")
    assert message_digest(0, "hi") != message_digest(2, "hi")
    assert message_digest(0, "hi") != message_digest(0, "hi!")
