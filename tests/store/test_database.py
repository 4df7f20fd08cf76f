"""The owner of a file on a bad day: a full disk, a damaged file, a damaged WAL.

A full disk is simulated per connection: ``PRAGMA max_page_count`` at the file's current size
makes every write that needs a new page fail with SQLITE_FULL, exactly as ENOSPC does. The
``Disk`` fixture applies it to every write connection the owner opens (the owner reopens its
file on each retry) until the test frees the space. Every test counts rows exactly.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

from ember.errors import StorageError, StorageUnavailable
from ember.protocols.base import Usage
from ember.store import writerloop
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.driver import Opened, connect
from ember.store.fileguard import wal_bytes
from ember.store.hold import HoldLimit
from ember.store.schema import PROJECT

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

WAIT = 10.0


def row(i: int) -> Callable[[Any], None]:
    rec = ExchangeRecord(
        float(i), "s", "/p", "anthropic", "m", 200, "ok", True,
        Usage(input_tokens=i, output_tokens=3), 0.001, "snap", 1.0, 0.5,
    )  # fmt: skip
    return rec.insert


def count(path: Path) -> tuple[int, str]:
    """(accounting rows, integrity_check) as another process would read them."""
    conn = connect(path, readonly=True).conn
    try:
        rows = int(conn.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0])
        return rows, str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def until(check: Callable[[], bool], seconds: float = WAIT) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Disk:
    """A disk that can be filled and freed: while full, every write connection opened gets
    ``max_page_count`` = its file's size, and ``fill`` applies it to the open one too."""

    def __init__(self) -> None:
        self.full = threading.Event()

    def connect(self, path: Path, **kw: Any) -> Opened:
        opened = connect(path, **kw)
        if self.full.is_set() and not kw.get("readonly"):
            _cap(opened.conn)
        return opened

    def fill(self, db: Database) -> None:
        # Every later connection first, then the open one, by a write queued like any other.
        # Under load it may share a batch with rows that find the file full: the batch rolls
        # back, and the cap (connection state, not undone by a rollback) holds anyway. A write
        # the caller waited for would then be dropped and counted as a lost write (or raise:
        # CI, stop 26); queued, it is held with the rows and retried with them, capping again
        # while the disk is full and doing nothing once it is freed.
        self.full.set()

        def cap(conn: Any) -> None:
            if self.full.is_set():
                _cap(conn)

        # On an idle writer it is done at once (the tests that count writes rely on that).
        futures.wait([db.submit(cap, label="test-disk-cap")], timeout=1.0)

    def free(self) -> None:
        self.full.clear()


def fill_up(db: Database) -> int:
    """Write small rows until the capped file refuses one (the last page's free bytes go
    first); returns how many were submitted. Bounded: a full page holds far fewer."""
    for n in range(1, 500):
        db.submit(row(n), label="accounting:probe")
        if until(lambda: db.health.state == "full" or db.idle(), 1.0) and not db.health.ok:
            return n
    raise AssertionError("the disk never filled")


def _cap(conn: Any) -> None:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    d = Disk()
    monkeypatch.setattr(writerloop, "connect", d.connect)
    monkeypatch.setattr(writerloop, "RETRY_AFTER_SECONDS", 0.2)
    return d


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "ember.db", PROJECT, hold=HoldLimit(10_000))
    yield db
    db.close()


def switched(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ember.store.database"]


def test_writes_of_a_full_disk_are_held_and_written_when_space_returns(
    owner: Database, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(50):
        owner.submit(row(i), label="accounting")
    assert owner.flush(WAIT)
    disk.fill(owner)
    futures = [owner.submit(row(i), label="accounting") for i in range(50, 450)]
    assert until(lambda: owner.health.state == "full")
    time.sleep(1.0)  # several retries, each refused
    h = owner.health
    written_while_full = count(owner.path)[0] - 50
    assert h.held + written_while_full == 400 and h.held > 0 and h.dropped == 0
    assert not owner.flush(0)  # held writes wait for the disk, not for us
    disk.free()
    assert until(lambda: all(f.done() for f in futures))
    assert all(f.exception() is None for f in futures)
    assert count(owner.path) == (450, "ok")
    h = owner.health
    assert h.ok and h.was == "full" and h.held == 0 and h.dropped == 0
    assert h.caught_up == 400 - written_while_full and not h.reportable
    lines = switched(caplog)
    assert len(lines) == 2, lines  # one line when switched off, one when back: not per retry
    assert "switched off (full" in lines[0] and "held in memory" in lines[0]
    assert "is back after" in lines[1] and f"{h.caught_up} held writes written" in lines[1]


def test_past_the_hold_limit_writes_are_dropped_and_counted_by_kind(
    tmp_path: Path, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(tmp_path / "ember.db", PROJECT, hold=HoldLimit(5))
    try:
        db.write(row(0))
        disk.fill(db)
        fill_up(db)
        probes = db.health.held  # the probe that found the disk full is held too
        written = count(db.path)[0]
        room = 5 - probes
        for i in range(20):
            db.submit(row(i), label="accounting")
        db.submit(row(99), label="shadow")
        h = db.health
        assert h.held == 5 and h.dropped == 21 - room
        assert dict(h.dropped_by) == {"accounting": 20 - room, "shadow": 1}
        assert h.reportable and h.to_json()["dropped_by"] == dict(h.dropped_by)
        disk.free()
        assert until(lambda: db.health.ok)
        assert db.flush(WAIT)
        assert count(db.path) == (written + 5, "ok")
        h = db.health
        assert h.ok and h.reportable and h.dropped == 21 - room  # back, and says what it lost
        assert f"{h.dropped} writes were lost" in h.describe()
        limit_lines = [m for m in switched(caplog) if "hold limit" in m]
        assert len(limit_lines) == 1
    finally:
        db.close()


def test_a_caller_that_waits_is_told_at_once_during_a_gap(owner: Database, disk: Disk) -> None:
    owner.write(row(0))
    disk.fill(owner)
    fill_up(owner)
    started = time.monotonic()
    with pytest.raises(StorageUnavailable, match="disk is full"):
        owner.write(row(2))
    assert time.monotonic() - started < 1.0
    assert owner.health.dropped == 1


def test_a_waiting_callers_write_that_tries_the_file_again_is_never_held(
    owner: Database, disk: Disk
) -> None:
    """With nothing held the writer leaves, and the next write tries the file once its retry
    is due. When that try fails, a write whose caller waits is failed — were it held, the
    request waiting on it would hang until the disk is freed."""
    owner.write(row(0))
    disk.fill(owner)
    with pytest.raises(StorageUnavailable):
        for _ in range(500):  # a page holds a few dozen rows
            owner.submit(row(1), hold=False).result(3)
    assert until(lambda: not owner.open)  # nothing held: the writer left
    time.sleep(0.3)  # the retry is due
    tried = owner.submit(row(2), hold=False)
    held = owner.submit(row(3), label="accounting")
    with pytest.raises(StorageUnavailable):
        tried.result(3)
    assert not held.done() and owner.health.held == 1
    disk.free()
    assert held.result(WAIT) is None


def test_shutdown_while_still_full_drops_the_held_writes_and_counts_them(
    tmp_path: Path, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    problems: list[dict[str, object]] = []
    db = Database(
        tmp_path / "ember.db",
        PROJECT,
        hold=HoldLimit(100),
        on_problem=lambda h: problems.append(h.to_json()),
    )
    db.write(row(0))
    disk.fill(db)
    probes = fill_up(db)
    futures = [db.submit(row(i), label="accounting") for i in range(1, 31)]
    written = count(db.path)[0]
    db.close()
    assert all(f.done() for f in futures)
    lost = [f for f in futures if f.exception() is not None]
    assert all(isinstance(f.exception(), StorageError) for f in lost)
    assert len(lost) == 30
    assert written + db.health.dropped == 1 + probes + 30
    assert db.health.held == 0
    assert problems[-1]["dropped_writes"] == db.health.dropped  # the final count, for stats
    assert any("at shutdown" in m for m in switched(caplog))


def test_a_short_lived_owner_holds_nothing(tmp_path: Path, disk: Disk) -> None:
    """A CLI command has nobody to write held rows later: the refused write fails."""
    db = Database(tmp_path / "ember.db", PROJECT, log_failures=False)
    try:
        db.write(row(0))
        disk.fill(db)
        futures = [db.submit(row(i)) for i in range(1, 200)]
        assert until(lambda: all(f.done() for f in futures))
        failed = sum(f.exception() is not None for f in futures)
        assert failed > 0 and db.health.dropped == failed
        assert count(db.path)[0] + failed == 200
    finally:
        db.close()


# -- damage ---------------------------------------------------------------------------------


def scribble(path: Path, start: int, length: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes((i * 7 + 3) % 251 for i in range(length)))


def test_a_wal_damaged_while_running_is_found_and_the_file_left_recoverable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage over the WAL's live frames while the owner runs: the periodic check finds it,
    the file is switched off in one line, and the damaged frames are never copied into the
    main file — after close it opens at its last good commit, intact."""
    db = Database(tmp_path / "ember.db", PROJECT, hold=HoldLimit(100), check_seconds=0.2)
    db.write(row(-1))
    # Another process reads meanwhile: checks pass, but no checkpoint can move the WAL's
    # frames past its snapshot, so the frames written next stay in the WAL to be damaged.
    reader = connect(db.path, readonly=True).conn
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM exchanges").fetchone()
    for i in range(200):
        db.submit(row(i), label="accounting")
        if i % 20 == 19:  # ten commits
            assert db.flush(WAIT)
    wal = Path(str(db.path) + "-wal")
    size = wal.stat().st_size
    scribble(wal, size - 3 * 4120, 3 * 4120)  # the newest frames: what the next reader needs
    reader.execute("COMMIT")
    reader.close()
    # A write elsewhere in the file (one page of its own): its own pages are fine, and the
    # check that follows it reads the damaged ones. (Writes that rewrote the damaged pages
    # would mend what readers see: the owner's page cache still has the true pages.)
    db.submit(lambda c: c.execute("INSERT INTO memory_meta VALUES ('k', 'v')"), label="meta")
    assert until(lambda: db.health.state == "corrupt")
    late = db.submit(row(999), label="accounting")
    with pytest.raises(StorageUnavailable):
        late.result(1)
    db.close()
    assert wal.exists(), "the damaged WAL was checkpointed into the file"
    snapshot = tmp_path / "after"
    snapshot.mkdir()
    shutil.copy(db.path, snapshot / "ember.db")
    shutil.copy(wal, snapshot / "ember.db-wal")
    rows, check = count(snapshot / "ember.db")
    assert check == "ok" and 1 < rows < 201
    lines = [m for m in switched(caplog) if "switched off" in m]
    assert len(lines) == 1 and "corrupt" in lines[0] and "doctor --recover" in lines[0]
    assert db.health.dropped >= 1


def test_garbage_written_before_start_is_found_before_the_first_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ember.db"
    db = Database(path, PROJECT)
    for i in range(300):
        db.submit(row(i))
    db.close()
    conn = connect(path).conn
    [leaf] = conn.execute(
        "SELECT pageno FROM dbstat WHERE name='exchanges' AND pagetype='leaf' LIMIT 1 OFFSET 2"
    ).fetchone()
    conn.close()
    scribble(path, (int(leaf) - 1) * 4096 + 8, 4000)
    damaged = path.read_bytes()
    again = Database(path, PROJECT, hold=HoldLimit(10))
    done = again.submit(row(1000), label="accounting")
    with pytest.raises(StorageUnavailable, match="damaged"):
        done.result(WAIT)
    again.close()
    assert path.read_bytes() == damaged  # nothing was written on top of the damage
    assert again.health.state == "corrupt" and dict(again.health.dropped_by) == {"accounting": 1}


def test_a_damaged_wal_left_by_a_stopped_process_is_not_silently_truncated(
    tmp_path: Path,
) -> None:
    """SQLite's own recovery would stop at the bad frame and let the next commits overwrite
    the frames after it; the owner refuses the file instead, for `ember doctor --recover`."""
    path = tmp_path / "ember.db"
    conn = connect(path).conn
    conn.execute("PRAGMA wal_autocheckpoint=0")
    from ember.store.migrations import migrate

    migrate(conn, PROJECT.migrations)
    for i in range(100):
        row(i)(conn)
    left = tmp_path / "left"
    left.mkdir()
    shutil.copy(path, left / "ember.db")
    shutil.copy(str(path) + "-wal", left / "ember.db-wal")
    conn.close()
    wal = left / "ember.db-wal"
    scribble(wal, wal.stat().st_size // 3, 3 * 4120)
    before = wal.read_bytes()
    db = Database(left / "ember.db", PROJECT, hold=HoldLimit(10))
    with pytest.raises(StorageUnavailable, match="WAL is damaged"):
        db.submit(row(1)).result(WAIT)
    db.close()
    assert wal.read_bytes() == before


def test_a_reader_that_finds_damage_switches_the_file_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ember.db"
    db = Database(path, PROJECT, hold=HoldLimit(10), check_seconds=3600)
    for i in range(300):
        db.submit(row(i))
    db.close()  # checkpointed into the file; the next use reopens it
    db.reopen()
    db.write(row(300))
    conn = connect(path, readonly=True).conn
    pages = [int(r[0]) for r in conn.execute("SELECT pageno FROM dbstat WHERE name='exchanges'")]
    conn.close()
    for page in pages[1:]:
        scribble(path, (page - 1) * 4096 + 8, 4000)
    with pytest.raises(StorageUnavailable):
        db.read(lambda c: c.execute("SELECT SUM(input_tokens) FROM exchanges").fetchall())
    assert until(lambda: not db.open)  # the writer quarantined the file and left
    with pytest.raises(StorageUnavailable):
        db.submit(row(1)).result(1)
    db.close()
    assert len([m for m in switched(caplog) if "switched off" in m]) == 1


def test_a_healthy_file_is_checked_and_checkpointed_while_written(tmp_path: Path) -> None:
    db = Database(tmp_path / "ember.db", PROJECT, check_seconds=0.05)
    try:
        for i in range(100):
            db.submit(row(i))
            if i % 20 == 0:
                time.sleep(0.06)
        assert db.flush(WAIT)
        assert db.health.ok and count(db.path) == (100, "ok")
    finally:
        db.close()
    assert not Path(str(db.path) + "-wal").exists()  # a clean close checkpoints as before


def test_a_large_wal_that_stopped_growing_is_not_checked_after_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL keeps its size after a checkpoint: checking "past the limit" instead of "grown
    by the limit" ran a quick_check after every commit of a busy proxy (half its CPU)."""
    monkeypatch.setattr(writerloop, "WAL_CHECK_BYTES", 64 * 1024)
    checks: list[float] = []
    real = Database._check_file

    def counted(self: Database) -> None:
        checks.append(time.monotonic())
        real(self)

    monkeypatch.setattr(Database, "_check_file", counted)
    db = Database(tmp_path / "ember.db", PROJECT, check_seconds=3600)
    try:
        big = "x" * 8000
        insert = "INSERT INTO memory_meta VALUES (?, ?)"
        db.write(lambda c: c.execute(insert, ("k0", big)))
        start = wal_bytes(db.path)  # the schema's creation is in the WAL too (~0.7 MB)
        for i in range(1, 400):  # until the WAL grew by three times the limit
            if wal_bytes(db.path) >= start + 3 * 64 * 1024:
                break
            db.write(lambda c, i=i: c.execute(insert, (f"k{i}", big)))
        grown = len(checks)
        assert grown >= 2  # once for the schema's WAL, again as it grew past it
        for i in range(200):  # the same rows rewritten: the checkpointed WAL is reused
            db.write(lambda c, i=i: c.execute(
                "UPDATE memory_meta SET value = ? WHERE key = 'k0'", (str(i),)))  # fmt: skip
        assert len(checks) - grown <= 2
        assert db.health.ok
    finally:
        db.close()


def test_held_writes_never_block_the_caller(owner: Database, disk: Disk) -> None:
    owner.write(row(0))
    disk.fill(owner)
    started = time.monotonic()
    for i in range(2000):
        owner.submit(row(i))
    assert time.monotonic() - started < 2.0
    logging.getLogger(__name__).debug("submitted")


def test_a_database_opened_where_the_features_were_not_installed_says_so_to_its_caller(
    tmp_path: Path,
) -> None:
    """A program that opens a project database without loading ``ember.compose`` gets the
    reason and the fix at once; the file is not switched off as "unwritable" (a wrong fix)
    and nothing is created in it."""
    code = (
        "from pathlib import Path\nfrom ember.store.database import Database\n"
        "from ember.store.schema import PROJECT\n"
        f"Database(Path({str(tmp_path / 'ember.db')!r}), PROJECT)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "NotInstalled" in done.stderr and "import ember.compose" in done.stderr
    assert "unwritable" not in done.stderr
    assert not (tmp_path / "ember.db").exists()
