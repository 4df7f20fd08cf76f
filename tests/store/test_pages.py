"""Reading SQLite pages and WAL frames without SQLite: checked against files SQLite wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ember.store import pages as pg
from ember.store.driver import Connection, driver


def wal_db(path: Path, rows: int, text: str = "x" * 50) -> Connection:
    """A WAL database with ``rows`` rows, one commit each, never checkpointed (still open)."""
    conn: Connection = driver().connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, f REAL, b BLOB)")
    for i in range(1, rows + 1):
        conn.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", (i, -i * 1000, text, i / 4, b"\x01"))
    return conn


def frozen(path: Path, into: Path) -> tuple[bytes, bytes]:
    """The file and its WAL as a process killed now would leave them."""
    shutil.copy(path, into)
    shutil.copy(str(path) + "-wal", str(into) + "-wal")
    return into.read_bytes(), Path(str(into) + "-wal").read_bytes()


def test_varints_and_records_decode_as_the_format_says() -> None:
    assert pg.varint(b"\x7f", 0) == (127, 1)
    assert pg.varint(b"\x81\x00", 0) == (128, 2)
    assert pg.varint(b"\xff" * 8 + b"\x01", 0) == ((1 << 64) - 255, 9)
    # header: size 5, types NULL, int8, text(2 bytes) = 13+2*2=17, one
    payload = bytes([5, 0, 1, 17, 9]) + b"\xfe" + b"hi"
    assert pg.record(payload) == (None, -2, "hi", 1)
    with pytest.raises(pg.Malformed):
        pg.record(bytes([5, 0, 1, 17, 9]) + b"\xfe" + b"h")  # body shorter than its header says
    with pytest.raises(pg.Malformed):
        pg.varint(b"\x81", 0)


def test_leaf_rows_read_every_row_of_a_table_including_overflow(tmp_path: Path) -> None:
    long_text = "overflowing " * 1000  # ~12 KB: several overflow pages
    conn = wal_db(tmp_path / "a.db", 30, long_text)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = (tmp_path / "a.db").read_bytes()
    size = pg.page_size_of(data[:100])
    assert size == 4096

    def fetch(n: int) -> bytes | None:
        return data[(n - 1) * size : n * size] or None

    found: dict[int, tuple[pg.Value, ...]] = {}
    for n in range(1, len(data) // size + 1):
        page = fetch(n)
        assert page is not None
        if pg.page_type(page, n) == pg.TABLE_LEAF:
            found.update((r.rowid, r.values) for r in pg.leaf_rows(page, n, fetch))
    rows = {i: (None, -i * 1000, long_text, i / 4, b"\x01") for i in range(1, 31)}
    assert {k: v for k, v in found.items() if k in rows} == rows


def test_a_leaf_page_half_overwritten_is_rejected_whole(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 40)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray((tmp_path / "a.db").read_bytes())
    data[4096 + 2000 : 4096 + 4096] = bytes((i * 13) % 256 for i in range(2096))
    page = bytes(data[4096:8192])
    with pytest.raises(pg.Malformed):
        pg.leaf_rows(page, 2, lambda n: None)


def test_a_clean_wal_is_all_verified(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 20)
    _, wal = frozen(tmp_path / "a.db", tmp_path / "copy.db")
    conn.close()
    scan = pg.read_wal(wal)
    assert scan.damage is None and scan.broken_at is None and not scan.tail
    assert scan.page_size == 4096 and scan.frames > 20


def test_garbage_over_frames_breaks_the_chain_and_leaves_a_tail(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 60)
    _, wal = frozen(tmp_path / "a.db", tmp_path / "copy.db")
    conn.close()
    step = 24 + 4096
    damaged = bytearray(wal)
    at = 32 + 20 * step + 100  # inside frame 21's header
    damaged[at : at + 2 * step] = bytes((i * 7) % 251 for i in range(2 * step))
    scan = pg.read_wal(bytes(damaged))
    assert scan.broken_at == 20
    assert scan.unverifiable > 0 and scan.tail and scan.damage is not None
    assert "frame 21" in scan.damage
    # the verified part is what SQLite's own recovery keeps
    (tmp_path / "copy.db-wal").write_bytes(bytes(damaged))
    ro = driver().connect(str(tmp_path / "copy.db"))
    kept = ro.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    ro.close()
    assert 0 < kept < 60


def test_a_torn_end_is_torn_not_garbage(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 10)
    _, wal = frozen(tmp_path / "a.db", tmp_path / "copy.db")
    conn.close()
    scan = pg.read_wal(wal[:-1000])
    assert scan.torn and scan.unverifiable == 0 and scan.broken_at is None
    assert scan.damage is not None and "torn" in scan.damage


def test_stale_frames_of_an_earlier_generation_are_not_damage(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 30)
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    conn.execute("INSERT INTO t (n) VALUES (1)")  # restarts the WAL from the top
    _, wal = frozen(tmp_path / "a.db", tmp_path / "copy.db")
    conn.close()
    scan = pg.read_wal(wal)
    assert scan.broken_at is not None  # the old frames after the new ones...
    assert scan.damage is None and scan.unverifiable == 0  # ...are stale, not damage


def test_a_fresh_header_makes_a_headless_file_readable(tmp_path: Path) -> None:
    conn = wal_db(tmp_path / "a.db", 25)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray((tmp_path / "a.db").read_bytes())
    data[:100] = b"\xab" * 100
    assert pg.page_size_of(bytes(data[:100])) is None
    assert pg.guess_page_size(bytes(data)) == 4096
    data[:100] = pg.fresh_header(4096, len(data) // 4096, wal=False)
    (tmp_path / "b.db").write_bytes(bytes(data))
    conn = driver().connect(str(tmp_path / "b.db"))
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 25
    conn.close()
