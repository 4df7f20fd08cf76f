"""A PostgreSQL server that goes away and comes back (issue #24): submitted writes are held and
arrive once it is back, waited writes and reads fail at once with ``StorageUnavailable``, the
outage and the recovery are each said once, and the password never shows. The server is
"down" behind a loopback port closed and opened again (``relay``)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from ember.errors import StorageUnavailable
from ember.store.accounting import ExchangeRecord
from ember.store.registry import Storage, problems_path
from tests.store.pg.relay import Relay

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
pytestmark = pytest.mark.fault

PASSWORD = "hunter2-outage"


def _row(session: str) -> ExchangeRecord:
    return ExchangeRecord(
        time.time(), session, "p", "openai", "gpt-5", 200, "ok", False, None, 0.1, "{}", 5.0, None
    )


def _count(pg_url: str, schema: str) -> int:
    with psycopg.connect(pg_url) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {schema}.exchanges").fetchone()[0])


def _wait(what: Any, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.1)


def test_writes_are_held_through_an_outage_and_arrive_when_the_server_is_back(
    tmp_path: Path, pg_url: str, server: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ember")
    storage = Storage(tmp_path, store_url=server.url(PASSWORD))
    path = tmp_path / "projects" / "acme-0123456789abcdef" / "ember.db"
    db = storage.database(path)
    schema = db.schema_name  # type: ignore[attr-defined]
    try:
        db.write(_row("before").insert)
        server.close()
        held = [db.submit(_row(f"during-{i}").insert, label="accounting") for i in range(5)]
        _wait(lambda: not db.health.ok)
        assert db.health.state == "unreachable" and db.health.held == 5
        # Known down: a waited write and a read are told at once, not after a timeout.
        started = time.monotonic()
        with pytest.raises(StorageUnavailable, match="cannot be reached"):
            db.write(_row("waited").insert)
        with pytest.raises(StorageUnavailable):
            db.read(lambda c: c.execute("SELECT 1").fetchone())
        assert time.monotonic() - started < 1.0
        held += [db.submit(_row(f"later-{i}").insert, label="accounting") for i in range(5)]
        time.sleep(1.0)  # a few retries fail meanwhile: still one line in the log
        server.open()
        _wait(lambda: all(f.done() for f in held))
        assert all(f.exception() is None for f in held)
        assert _count(pg_url, schema) == 11  # before + 10 held; the waited write was refused
        assert db.health.ok and db.health.caught_up == 10 and db.health.dropped == 1
        assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0]) == 11
        _wait(lambda: "back after" in caplog.text, 10)  # said once the held writes are in
    finally:
        storage.close()
    said = [r.getMessage() for r in caplog.records if r.name.startswith("ember")]
    assert len([m for m in said if "unreachable" in m and "holding writes" in m]) == 1
    assert len([m for m in said if "back after" in m]) == 1
    everything = caplog.text + json.dumps(json.loads(problems_path(tmp_path).read_text()))
    assert "ember@127.0.0.1" in everything and PASSWORD not in everything


def test_a_store_that_only_reads_comes_back_by_itself(
    tmp_path: Path, server: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    """No write to retry: a read after the retry is due tries the server again."""
    storage = Storage(tmp_path, store_url=server.url())
    db = storage.database(tmp_path / "stats.db")
    try:
        assert db.data_version() >= 0
        server.close()
        with pytest.raises(StorageUnavailable):
            db.data_version()
        assert db.health.state == "unreachable"
        server.open()

        def back() -> bool:
            try:
                db.data_version()
            except StorageUnavailable:
                return False
            return True

        _wait(back, 30)
        assert db.health.ok
    finally:
        storage.close()


def test_a_restart_between_writes_is_not_an_outage(
    tmp_path: Path, server: Relay, caplog: pytest.LogCaptureFixture
) -> None:
    """Every pooled connection dies with a restart; the next write gets a fresh one instead of
    switching the database off for a server that is already back."""
    caplog.set_level(logging.INFO, logger="ember")
    storage = Storage(tmp_path, store_url=server.url())
    db = storage.database(tmp_path / "stats.db")
    try:
        for i in range(3):
            db.write(_row(f"before-{i}").insert)
        server.close()  # the live connections are cut...
        server.open()  # ...and the server is back before the next write
        db.write(_row("after").insert)
        assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0]) == 4
        assert db.health.ok
    finally:
        storage.close()
    assert "switched off" not in caplog.text


@pytest.mark.parametrize("waited", [False, True], ids=["submitted", "waited"])
def test_a_commit_whose_reply_is_lost_is_written_once(
    tmp_path: Path, pg_url: str, server: Relay, waited: bool
) -> None:
    """The connection drops after the server got the batch's COMMIT and before its reply:
    the server is asked what became of the transaction, so the row is there exactly once
    (held and written again, it was there twice) and a waiting caller gets its answer."""
    storage = Storage(tmp_path, store_url=server.url())
    db = storage.database(tmp_path / "projects" / "acme-0123456789abcdef" / "ember.db")
    schema = db.schema_name  # type: ignore[attr-defined]
    try:
        db.write(_row("before").insert)  # migrated: the next COMMIT is the batch's
        server.cut_after, server.cut_on = b"COMMIT", b"lost reply"  # not a read's COMMIT
        if waited:
            db.write(_row("lost reply").insert)
        else:
            db.submit(_row("lost reply").insert)
            # flush says False at once while the write is held: the server may not have
            # finished that COMMIT when first asked ("in progress"), so it is asked again
            _wait(lambda: db.flush(5))
        assert server.cut_after is None  # the cut did happen
        db.write(_row("after").insert)
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute(f"SELECT session_id FROM {schema}.exchanges ORDER BY id").fetchall()
        assert [r[0] for r in rows] == ["before", "lost reply", "after"]
    finally:
        storage.close()
