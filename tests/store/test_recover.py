"""`ember doctor --recover` on files damaged in known ways, with known rows before the damage.

Each test builds a project database holding ``N`` accounting rows, keeps a copy of every row,
damages the file, salvages it and checks three things: every row copied is exactly a row the
file held (nothing invented, nothing garbled); ``copied + lost`` is every row the file held
when the report says its counts are exact; and when they cannot be exact, the report says
which tables (or ``*``: the file) may have lost rows beyond ``lost``, and why. The damaged
file is never modified.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.driver import connect
from ember.store.migrations import migrate
from ember.store.recover import RecoveryReport, salvage
from ember.store.schema import PROJECT

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

N = 3000
PAGE = 4096

Rows = dict[int, tuple[Any, ...]]


def build(path: Path, rows: int = N, *, keep_wal: bool = False) -> Rows:
    """A project database with ``rows`` accounting rows, one commit each. ``keep_wal``: the
    rows stay in the WAL, as a killed process leaves them. Returns the rows by id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(path).conn
    conn.execute("PRAGMA wal_autocheckpoint=0")
    migrate(conn, PROJECT.migrations)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(rows):
        rec = ExchangeRecord(
            float(i), f"s{i % 7}", "/p", "anthropic", "m", 200, "ok", True,
            Usage(input_tokens=i, output_tokens=3), 0.001, "snap", 1.0, 0.5,
        )  # fmt: skip
        conn.execute("BEGIN IMMEDIATE")
        rec.insert(conn)
        conn.execute("COMMIT")
    held = read_rows(conn)
    if keep_wal:
        frozen = path.with_name("frozen")
        shutil.copy(path, frozen)
        shutil.copy(str(path) + "-wal", str(frozen) + "-wal")
        conn.close()
        os.replace(frozen, path)
        os.replace(str(frozen) + "-wal", str(path) + "-wal")
        Path(str(path) + "-shm").unlink(missing_ok=True)
    else:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return held


def read_rows(conn: Any) -> Rows:
    return {int(r[0]): tuple(r) for r in conn.execute("SELECT * FROM exchanges")}


def garbage(path: Path, start: int, length: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes((i * 7 + 3) % 251 for i in range(length)))


def pages(path: Path, kind: str) -> list[tuple[int, int]]:
    """(page number, cells) of the accounting table's pages of ``kind`` (leaf, internal)."""
    conn = connect(path).conn
    found = conn.execute(
        "SELECT pageno, ncell FROM dbstat WHERE name='exchanges' AND pagetype=? ORDER BY pageno",
        (kind,),
    ).fetchall()
    conn.close()
    return [(int(p), int(n)) for p, n in found]


def recover(path: Path) -> tuple[RecoveryReport, Rows]:
    """Salvage ``path``; the report and the accounting rows of the new file. Checks on the
    way that the damaged file (and its WAL) were not touched."""
    before = [p.read_bytes() for p in (path, Path(str(path) + "-wal")) if p.exists()]
    out = path.with_name("recovered.db")
    report = salvage(path, out, PROJECT)
    after = [p.read_bytes() for p in (path, Path(str(path) + "-wal")) if p.exists()]
    assert after == before, "the damaged file was modified"
    conn = connect(out, readonly=True).conn
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return report, read_rows(conn)
    finally:
        conn.close()


def faithful(held: Rows, got: Rows, report: RecoveryReport) -> None:
    """Every copied row is exactly one the file held, and the report counts what was copied."""
    assert all(got[k] == held.get(k) for k in got), "a recovered row differs from the original"
    assert report.tables["exchanges"].copied == len(got)


def test_a_garbage_header_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    held = build(path)
    garbage(path, 0, 100)
    report, got = recover(path)
    faithful(held, got, report)
    assert report.exact and (report.copied, report.lost) == (N, 0)
    assert any("header was not valid" in n for n in report.notes)


def test_garbage_over_the_whole_first_page_matches_rows_by_shape_and_says_so(
    tmp_path: Path,
) -> None:
    """The schema's root page is gone: no table can be named, rows are matched by shape, and
    no count of what was lost can be given."""
    path = tmp_path / "ember.db"
    held = build(path)
    garbage(path, 0, PAGE)
    report, got = recover(path)
    faithful(held, got, report)
    assert len(got) == N  # every accounting leaf page is intact
    assert not report.exact and "exchanges" in report.uncounted
    assert any("matched to tables by their shape" in n for n in report.notes)


def test_a_leaf_page_of_garbage_is_counted_exactly_from_the_indexes(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    held = build(path)
    leaves = pages(path, "leaf")
    page, cells = leaves[len(leaves) // 2]
    garbage(path, (page - 1) * PAGE, PAGE)
    report, got = recover(path)
    faithful(held, got, report)
    entry = report.tables["exchanges"]
    assert report.exact
    assert entry.copied + entry.lost == N
    assert entry.lost <= cells  # the rows of that page (one may survive elsewhere)
    assert entry.lost >= cells - 1


def test_garbage_over_an_interior_page_loses_no_row(tmp_path: Path) -> None:
    """Below a damaged interior page the leaves are intact: SQLite cannot reach them, the raw
    pages can."""
    path = tmp_path / "ember.db"
    held = build(path)
    [(root, _)] = pages(path, "internal")
    garbage(path, (root - 1) * PAGE, PAGE)
    report, got = recover(path)
    faithful(held, got, report)
    entry = report.tables["exchanges"]
    assert report.exact and (entry.copied, entry.lost) == (N, 0) and entry.rescued > 0


def test_garbage_written_into_the_middle_counts_what_it_took(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    held = build(path)
    size = path.stat().st_size
    garbage(path, size // 2 + 8, 3 * PAGE)  # three pages, whatever they hold
    report, got = recover(path)
    faithful(held, got, report)
    entry = report.tables["exchanges"]
    if report.exact:
        assert entry.copied + entry.lost == N
        assert entry.lost > 0 or entry.copied == N
    else:  # rows that left no trace cannot be counted: the report says it could not count
        assert entry.copied + entry.lost <= N and "exchanges" in report.uncounted


def test_truncated_pages_copy_what_is_left_and_say_what_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    held = build(path)
    os.truncate(path, int(path.stat().st_size * 0.7) + 1000)  # mid-page, as a torn copy
    report, got = recover(path)
    faithful(held, got, report)
    entry = report.tables["exchanges"]
    assert 0 < entry.copied < N and entry.copied + entry.lost <= N
    assert any("pages past its end are lost" in n for n in report.notes)
    if entry.copied + entry.lost < N:  # some rows left no trace: the report must say so
        assert "exchanges" in report.uncounted and not report.exact


@pytest.mark.parametrize("cut", [0.35, 0.5, 0.7, 0.85, 0.95])
@pytest.mark.parametrize("into_page", [1000, 2048, 4000])
def test_wherever_a_copy_is_torn_no_row_is_made_up(
    tmp_path: Path, cut: float, into_page: int
) -> None:
    """A page cut mid-way holds the pointers of cells whose bytes are gone: padded with
    zeros it read as rows of zeros and truncated text (a row 'anthropi' with status 0), copied
    as if the user's. Wherever the copy ends, every row recovered is one the file held."""
    path = tmp_path / "ember.db"
    held = build(path)
    os.truncate(path, int(path.stat().st_size * cut) // 4096 * 4096 + into_page)
    report, got = recover(path)
    faithful(held, got, report)


def test_a_file_cut_before_its_schema_ends_copies_no_stranger_rows(tmp_path: Path) -> None:
    """Cut at 40% the schema's last page is gone too (and every accounting leaf, which come
    after the tables' first pages): nothing can be named or counted, and nothing from the
    schema, the migrations or another table is passed off as a row."""
    path = tmp_path / "ember.db"
    held = build(path)
    os.truncate(path, int(path.stat().st_size * 0.4) + 1000)
    report, got = recover(path)
    faithful(held, got, report)
    assert report.copied == 0 and not report.exact and "exchanges" in report.uncounted
    assert any("matched to tables by their shape" in n for n in report.notes)


def test_a_torn_wal_keeps_every_whole_commit_and_says_the_last_is_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ember.db"
    held = build(path, rows=300, keep_wal=True)
    wal = Path(str(path) + "-wal")
    os.truncate(wal, wal.stat().st_size - 2000)  # the last frame half written
    report, got = recover(path)
    faithful(held, got, report)
    assert len(got) == 299  # the commit whose frame tore is the one row gone
    assert not report.exact and report.uncounted == ["*"]
    assert any("torn" in n for n in report.notes)


def test_garbage_over_wal_frames_rescues_the_commits_after_it(tmp_path: Path) -> None:
    """SQLite's recovery stops at the first bad frame; the commits after it are still in
    intact frames, and their rows come back."""
    path = tmp_path / "ember.db"
    held = build(path, rows=300, keep_wal=True)
    wal = Path(str(path) + "-wal")
    garbage(wal, wal.stat().st_size // 2, 3 * (PAGE + 24))
    sqlite_alone = _count_as_sqlite_reads(path, tmp_path / "plain")
    report, got = recover(path)
    faithful(held, got, report)
    entry = report.tables["exchanges"]
    assert sqlite_alone < len(got) <= 300 and entry.rescued == len(got) - sqlite_alone
    assert not report.exact and report.uncounted == ["*"]
    assert any("rescued from intact WAL frames" in n for n in report.notes)


def _count_as_sqlite_reads(path: Path, folder: Path) -> int:
    folder.mkdir()
    shutil.copy(path, folder / "c.db")
    shutil.copy(str(path) + "-wal", folder / "c.db-wal")
    conn = connect(folder / "c.db", readonly=True).conn
    count = int(conn.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0])
    conn.close()
    return count


def test_an_intact_file_recovers_whole_and_exact(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    held = build(path, rows=200)
    report, got = recover(path)
    faithful(held, got, report)
    assert report.exact and (report.copied, report.lost, report.notes) == (200, 0, [])
