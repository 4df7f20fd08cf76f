"""A team's store on a bad day, below the proxy: writes journaled through an outage, kept through
a stop and a kill, delivered once; a server that never answers, bounded; health back without
traffic; one line each way. The server is "down" behind a loopback port closed and opened
again, or frozen (``relay``)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ember.errors import StorageUnavailable
from ember.store.accounting import ExchangeRecord
from ember.store.journal import journal_dir
from ember.store.pg import deadline, pool, watch
from ember.store.pg.held import HeldWrites
from ember.store.registry import Storage
from tests.store.pg.relay import Relay

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytestmark = pytest.mark.fault

ACME = Path("projects") / "acme-0123456789abcdef" / "ember.db"


def _row(session: str) -> ExchangeRecord:
    return ExchangeRecord(
        time.time(), session, "p", "openai", "gpt-5", 200, "ok", False, None, 0.1, "{}", 5.0, None
    )


@pytest.fixture(autouse=True)
def _quick_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "PROBE_SECONDS", 0.3)


def _sessions(pg_url: str, schema: str) -> list[str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(f"SELECT session_id FROM {schema}.exchanges ORDER BY id").fetchall()
    return [r[0] for r in rows]


def _wait(what: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline_at = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline_at, "not within the time allowed"
        time.sleep(0.05)


def _die(storage: Storage) -> None:
    """What a kill -9 leaves of a process's storage: its journal files, unlocked; nothing
    else happens (no close, no last try)."""
    journal = storage._journal
    assert journal is not None
    journal._stop.set()
    for segment in list(journal._segments):
        os.close(segment.fd)
        segment.fd = -1
    for db in list(storage._dbs.values()):
        with db._queue.cond:
            db._queue.drain()
            db._closed = True
            db._queue.cond.notify_all()


def _journal_files(home: Path) -> list[Path]:
    return sorted(journal_dir(home).glob("writes-*"))


def test_a_stop_while_the_server_is_down_keeps_the_writes_and_the_next_start_delivers_them(
    tmp_path: Path, pg_url: str, server: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ember")
    first = Storage(tmp_path, store_url=server.url())
    db = first.database(tmp_path / ACME)
    schema = db.schema_name  # type: ignore[attr-defined]
    db.write(_row("before").insert)
    server.close()
    for i in range(30):
        db.submit(_row(f"held-{i}").insert, label="accounting")
    _wait(lambda: not db.health.ok)
    started = time.monotonic()
    first.close()  # still down: nothing dropped, nothing waited for
    assert time.monotonic() - started < 3
    assert db.health.dropped == 0
    assert _journal_files(tmp_path) and "30 writes are kept" in caplog.text
    server.open()
    second = Storage(tmp_path, store_url=server.url())
    try:
        assert second.deliver_left(timeout=30) == 30
        _wait(lambda: len(_sessions(pg_url, schema)) >= 31)
        assert _sessions(pg_url, schema) == ["before", *(f"held-{i}" for i in range(30))]
    finally:
        second.close()
    assert _journal_files(tmp_path) == []


def test_a_kill_between_the_commit_and_its_note_does_not_write_twice(
    tmp_path: Path, pg_url: str, server: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Storage(tmp_path, store_url=server.url())
    db = first.database(tmp_path / ACME)
    schema = db.schema_name  # type: ignore[attr-defined]
    with monkeypatch.context() as m:  # the kill comes after every COMMIT, before each note
        m.setattr(HeldWrites, "_note_done", lambda self, jobs: None)
        for i in range(5):
            db.submit(_row(f"s{i}").insert, label="accounting")
        assert db.flush(10)
    _die(first)
    second = Storage(tmp_path, store_url=server.url())
    try:
        assert second.deliver_left(timeout=30) == 5  # replayed, and found applied
        _wait(lambda: second.database(tmp_path / ACME).health.caught_up == 0 and second.flush(5))
        assert _sessions(pg_url, schema) == [f"s{i}" for i in range(5)]
    finally:
        second.close()
    assert _journal_files(tmp_path) == []


def test_a_commit_whose_answer_was_lost_before_a_stop_is_written_once(
    tmp_path: Path, pg_url: str, server: Relay
) -> None:
    """The reply to COMMIT never comes and the server goes: the process stops not knowing
    whether it took. The next start asks the store (the write's key), not a retry."""
    first = Storage(tmp_path, store_url=server.url())
    db = first.database(tmp_path / ACME)
    schema = db.schema_name  # type: ignore[attr-defined]
    db.write(_row("before").insert)  # migrated: the next COMMIT is the batch's
    server.close_on_cut = True
    server.cut_after, server.cut_on = b"COMMIT", b"lost reply"  # not a read's COMMIT
    held = db.submit(_row("lost reply").insert, label="accounting")
    _wait(lambda: db.health.state == "unreachable")  # nobody could say whether it took
    assert not held.done()
    server.close()
    first.close()
    server.open()
    second = Storage(tmp_path, store_url=server.url())
    try:
        assert second.deliver_left(timeout=30) == 1
        _wait(lambda: second.flush(5))
        assert _sessions(pg_url, schema) == ["before", "lost reply"]
    finally:
        second.close()


def test_a_server_that_takes_the_connection_and_never_answers_is_bounded_here(
    tmp_path: Path, pg_url: str, server: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "ANSWER_SECONDS", 1.5)
    storage = Storage(tmp_path, store_url=server.url())
    db = storage.database(tmp_path / ACME)
    schema = db.schema_name  # type: ignore[attr-defined]
    try:
        db.write(_row("before").insert)
        cut = deadline.cut
        server.frozen.set()
        held = db.submit(_row("frozen").insert, label="accounting")
        _wait(lambda: db.health.state == "unreachable", 15)  # not for ever
        assert deadline.cut > cut and not held.done()
        started = time.monotonic()
        with pytest.raises(StorageUnavailable):
            db.read(lambda c: c.execute("SELECT 1").fetchone())  # known down: at once
        assert time.monotonic() - started < 1
        server.frozen.clear()
        held.result(30)
        assert _sessions(pg_url, schema) == ["before", "frozen"]
    finally:
        server.frozen.clear()
        storage.close()


def test_health_comes_back_without_traffic_and_each_change_is_said_once(
    tmp_path: Path, server: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ember")
    storage = Storage(tmp_path, store_url=server.url())
    dbs = [storage.database(tmp_path / f"p{i}.db") for i in range(3)] + [storage.stats()]
    try:
        for db in dbs:
            db.data_version()  # each schema made, each with a connection behind it
        server.close()
        for db in dbs:
            with pytest.raises(StorageUnavailable):
                db.data_version()
        assert all(db.health.state == "unreachable" for db in dbs)
        server.open()
        _wait(lambda: all(db.health.ok for db in dbs), 10)  # nobody read or wrote
        assert storage.problems() == []
        _wait(lambda: "back after" in caplog.text, 10)
    finally:
        storage.close()
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [("unreachable" in r.getMessage(), "back after" in r.getMessage()) for r in said] == [
        (True, False),
        (False, True),
    ], [r.getMessage() for r in said]


def test_a_store_down_at_start_fails_fast_after_the_first_try_and_holds_its_writes(
    tmp_path: Path, pg_url: str, server: Relay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "WAIT_SECONDS", 1.0)
    server.close()
    storage = Storage(tmp_path, store_url=server.url())
    try:
        stats = storage.stats()
        with pytest.raises(StorageUnavailable):
            stats.data_version()  # the first: the pool's timeout
        db = storage.database(tmp_path / ACME)
        started = time.monotonic()
        with pytest.raises(StorageUnavailable):
            db.data_version()  # another schema, after it: at once
        assert time.monotonic() - started < 0.5
        futures = [db.submit(_row(f"early-{i}").insert, label="accounting") for i in range(3)]
        server.open()
        for f in futures:
            f.result(30)
        schema = db.schema_name  # type: ignore[attr-defined]
        assert _sessions(pg_url, schema) == [f"early-{i}" for i in range(3)]
        assert db.health.caught_up == 3 and db.health.dropped == 0
    finally:
        storage.close()
