"""The injection ledger keeps a session's entries in memory and in the project database."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

import pytest

from ember.errors import StorageError
from ember.memory.ledger import InjectionLedger, LedgerEntry, ask_counts, message_digest
from ember.store.registry import Storage


async def test_ledger_reads_from_memory_after_the_first_load(tmp_path: Path) -> None:
    db = tmp_path / "p" / "ember.db"
    storage = Storage(tmp_path)
    ledger = InjectionLedger(storage)
    assert ledger.cached(db, "s") is None
    await ledger.record(db, "s", LedgerEntry(0, "d", "block", ("id1",)))
    assert ledger.cached(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    assert storage.database(db).flush(10)  # the row is queued, not awaited
    fresh = InjectionLedger(Storage(tmp_path))  # a restarted proxy: loaded from the file once
    assert fresh.cached(db, "s") is None
    assert await fresh.entries(db, "s") == [LedgerEntry(0, "d", "block", ("id1",))]
    assert fresh.cached(db, "s") is not None
    storage.close()


async def test_a_new_entry_does_not_wait_for_the_writer(tmp_path: Path) -> None:
    """The ask goes on while its row waits behind other writes (8 agents: 9 ms p50)."""
    db = tmp_path / "p" / "ember.db"
    storage = Storage(tmp_path)
    ledger = InjectionLedger(storage)
    await ledger.record(db, "s", LedgerEntry(0, "d0", ""))  # the file exists and is migrated
    busy, release = threading.Event(), threading.Event()
    storage.database(db).submit(lambda c: (busy.set(), release.wait(10)))
    assert busy.wait(10)
    await asyncio.wait_for(ledger.record(db, "s", LedgerEntry(2, "d2", "block")), 2)
    assert ledger.cached(db, "s") == [LedgerEntry(0, "d0", ""), LedgerEntry(2, "d2", "block")]
    release.set()
    assert storage.database(db).flush(10)
    fresh = InjectionLedger(Storage(tmp_path))  # a restarted proxy finds the row on file
    assert await fresh.entries(db, "s") == [LedgerEntry(0, "d0", ""), LedgerEntry(2, "d2", "block")]
    storage.close()


async def test_a_database_that_is_off_refuses_the_row_and_the_ask_gets_no_entry(
    tmp_path: Path,
) -> None:
    """The first row finds the file unwritable: it is held (written when the file is back),
    and the database is off from then on; the next ask's row is refused at once, so nothing
    is remembered for it and the caller injects nothing."""
    blocker = tmp_path / "file"
    blocker.write_text("a file where the project directory should be")
    db = blocker / "ember.db"
    storage = Storage(tmp_path)
    ledger = InjectionLedger(storage)
    with contextlib.suppress(StorageError):
        await ledger.record(db, "s", LedgerEntry(0, "d", "block"))
    for _ in range(200):
        if not storage.database(db).health.ok:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(StorageError):
        await ledger.record(db, "s", LedgerEntry(2, "d2", "block"))
    assert LedgerEntry(2, "d2", "block") not in (ledger.cached(db, "s") or [])
    storage.close()


def test_digest_depends_on_position_and_text() -> None:
    assert message_digest(0, "hi") == message_digest(0, "hi")
    assert message_digest(0, "hi") != message_digest(2, "hi")
    assert message_digest(0, "hi") != message_digest(0, "hi!")


async def test_on_postgres_a_restarted_proxy_replays_the_entries_and_stats_count_them(
    tmp_path: Path, pg_url: str
) -> None:
    """The ledger on a PostgreSQL store: no file exists, yet a restarted proxy loads the
    session's entries from the project's schema; a repeated row is ignored; ``ember stats``
    counts asks with and without memories as on SQLite."""
    db = tmp_path / "p" / "ember.db"
    storage = Storage(tmp_path, store_url=pg_url)
    ledger = InjectionLedger(storage)
    entries = [LedgerEntry(0, "d0", "block", ("id1",)), LedgerEntry(2, "d2", "", busy=True)]
    for entry in [*entries, entries[0]]:
        await ledger.record(db, "s", entry)
    assert storage.database(db).flush(10)
    fresh_storage = Storage(tmp_path, store_url=pg_url)
    try:
        assert not db.exists()
        assert await InjectionLedger(fresh_storage).entries(db, "s") == entries
        counts = fresh_storage.database(db).read(ask_counts)
        assert (counts.asks, counts.with_memories, counts.busy) == (2, 1, 1)
    finally:
        fresh_storage.close()
        storage.close()
