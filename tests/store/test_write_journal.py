"""The write journal on its own (no server): what it keeps, for how long, and what a start
reads of what a stopped process left (``store.pg.journal``, ``store.ops``)."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ember.store.journalcheck import dead_segments
from ember.store.ops import Op, UnknownOp, replayable, resolve
from ember.store.pg.journal import PREFIX, SUFFIX, WriteJournal, read_left

pytestmark = pytest.mark.fault

STORE = "ember@db:5432/team"


@replayable
def put(conn: Any, args: Any) -> None:
    conn.execute("INSERT INTO t VALUES (?)", (args,))


def not_marked(conn: Any, args: Any) -> None:
    """Not ``@replayable``: no journal line may name it."""


def journal(tmp_path: Path, **kw: Any) -> WriteJournal:
    kw.setdefault("limit", 10_000_000)
    return WriteJournal(tmp_path / "journal", STORE, **kw)


def die(j: WriteJournal) -> None:
    """What a kill -9 leaves: the files, without the process's locks."""
    j._stop.set()
    for segment in list(j._segments):
        os.close(segment.fd)


def left(tmp_path: Path, store: str = STORE) -> list[tuple[str, Any]]:
    dead = dead_segments(tmp_path / "journal", prefix=PREFIX, suffix=SUFFIX)
    try:
        return [(w.op, w.args) for w in read_left(dead.paths, store).writes]
    finally:
        dead.release(delete=False)


def test_a_write_not_done_is_read_back_in_order_after_a_kill(tmp_path: Path) -> None:
    j = journal(tmp_path)
    ops = [Op(put, i) for i in range(5)]
    tickets = [j.append(op, tmp_path / "p.db", "project", "accounting") for op in ops]
    j.done([t for t in tickets[:2] if t is not None])
    assert left(tmp_path) == []  # a live journal is never read as a stopped one
    die(j)
    assert left(tmp_path) == [(f"{__name__}:put", i) for i in (2, 3, 4)]


def test_files_are_private_and_a_clean_stop_with_everything_done_leaves_nothing(
    tmp_path: Path,
) -> None:
    j = journal(tmp_path)
    assert stat.S_IMODE((tmp_path / "journal").stat().st_mode) == 0o700
    [segment] = j.segments
    assert stat.S_IMODE(segment.stat().st_mode) == 0o600
    ticket = j.append(Op(put, 1), tmp_path / "p.db", "project", "ledger")
    assert ticket is not None
    j.done([ticket])
    assert j.close() == 0
    assert list((tmp_path / "journal").iterdir()) == []


def test_a_stop_keeps_the_writes_not_done(tmp_path: Path) -> None:
    j = journal(tmp_path)
    j.append(Op(put, 1), tmp_path / "p.db", "project", "accounting")
    assert j.close() == 1
    assert left(tmp_path) == [(f"{__name__}:put", 1)]


def test_full_segments_go_once_all_their_writes_are_done(tmp_path: Path) -> None:
    j = journal(tmp_path, segment_bytes=400)
    tickets = [j.append(Op(put, "x" * 50), tmp_path / "p.db", "project", "t") for _ in range(20)]
    assert len(j.segments) > 3
    j.done([t for t in tickets if t is not None])
    assert len(j.segments) == 1  # only the one being written
    assert j.size < 600


def test_past_its_bound_the_journal_refuses_and_says_why_then_takes_again(tmp_path: Path) -> None:
    j = journal(tmp_path, limit=1_000)
    tickets = [j.append(Op(put, "y" * 100), tmp_path / "p.db", "project", "t") for _ in range(20)]
    taken = [t for t in tickets if t is not None]
    assert 0 < len(taken) < 20 and j.size <= 1_000
    assert j.refused.count == 20 - len(taken) and "limit" in j.refused.cause
    j.done(taken)
    j.close()


def test_another_stores_writes_are_left_for_a_start_with_that_store(tmp_path: Path) -> None:
    j = journal(tmp_path)
    j.append(Op(put, 1), tmp_path / "p.db", "project", "t")
    die(j)
    dead = dead_segments(tmp_path / "journal", prefix=PREFIX, suffix=SUFFIX)
    try:
        found = read_left(dead.paths, "ember@other:5432/team")
    finally:
        dead.release(delete=False)
    assert found.writes == [] and found.paths == [] and found.elsewhere == {STORE: 1}


def test_a_line_cut_short_by_the_kill_is_never_a_write(tmp_path: Path) -> None:
    j = journal(tmp_path)
    j.append(Op(put, 1), tmp_path / "p.db", "project", "t")
    [segment] = j.segments
    die(j)
    with segment.open("ab") as f:
        f.write(b'["w", "k2", "p.db", "project", "t", "ember.x:y", [1, ')
    dead = dead_segments(tmp_path / "journal", prefix=PREFIX, suffix=SUFFIX)
    try:
        found = read_left(dead.paths, STORE)
    finally:
        dead.release(delete=False)
    assert [w.args for w in found.writes] == [1] and found.torn == 1


def test_a_journal_line_names_only_replayable_functions_of_embers() -> None:
    assert resolve("ember.store.accounting:insert_row").__name__ == "insert_row"
    for name in ("os:system", "ember.store.pg.journal:read_left", "ember.nope:x", "junk"):
        with pytest.raises(UnknownOp):
            resolve(name)
    with pytest.raises(TypeError):
        Op(not_marked, 1)


#: Every write a journal on disk may name, as it names it. A journal outlives the process
#: that wrote it (a proxy killed while its server was down delivers at its next start, maybe
#: after an upgrade): a function moved or renamed makes those writes unknown, and lost. Keep
#: the old name resolving (a module-level alias marked ``@replayable``) before changing this.
JOURNALED = {
    "ember.memory.ledger:insert_entry",
    "ember.shadow.observe:_first_touch",
    "ember.shadow.observe:_opened",
    "ember.store.accounting:insert_row",
    "ember.transcript_writes:first_touch",
    "ember.transcript_writes:record_unplaced",
    "ember.transcript_writes:save_turn",
}


def _marked_replayable() -> set[str]:
    """``module:function`` of every function under ``src/ember`` decorated ``@replayable``."""
    src = Path(__file__).resolve().parents[2] / "src"
    found = set()
    for path in (src / "ember").rglob("*.py"):
        module = ".".join(path.relative_to(src).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Name) and d.id == "replayable" for d in node.decorator_list
            ):
                found.add(f"{module}:{node.name}")
    return found


def test_the_names_journals_hold_are_the_ones_this_version_resolves() -> None:
    import ember.compose  # noqa: F401  (the features, as a proxy loads them)

    assert _marked_replayable() == JOURNALED, (
        "a replayable write was added, moved or renamed: a journal left by an earlier "
        "version names the old one (keep it resolving), then update JOURNALED"
    )
    for name in JOURNALED:
        assert callable(resolve(name)), name
