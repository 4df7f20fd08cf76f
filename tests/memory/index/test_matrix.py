"""The in-memory matrix search: exact, never stale, bounded, and the index's below it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ember.memory import HierarchicalMemory
from ember.memory.index import matrix
from ember.memory.index.base import exact_cosines, put_vectors
from ember.memory.index.matrix import MatrixSearch
from ember.memory.index.sqlite_vec import SqliteVecIndex
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT
from tests.memory.conftest import HashEmbedder


def _unit(n: int, dim: int, seed: int) -> np.ndarray:  # type: ignore[type-arg]
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _store(tmp_path: Path, n: int) -> tuple[Database, MatrixSearch, np.ndarray]:  # type: ignore[type-arg]
    db = Database(tmp_path / "ember.db", PROJECT, vec=True)
    inner = SqliteVecIndex(64)
    db.write(inner.ensure)
    index = MatrixSearch(inner, 64)
    data = _unit(n, 64, 1)
    _put(db, index, list(range(1, n + 1)), data)
    return db, index, data


def _put(db: Database, index: MatrixSearch, seqs: list[int], data: np.ndarray) -> None:  # type: ignore[type-arg]
    def load(conn: Connection) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO memories (seq, id, content, content_hash, importance, "
            "created_at, valid_from) VALUES (?, ?, 'x', 'h', 0.5, 0, 0)",
            [(s, f"m{s}") for s in seqs],
        )
        put_vectors(conn, seqs, data)
        index.add(conn, seqs, data)

    db.write(load, exclusive=True)


def test_the_matrix_returns_the_exact_top_k_with_exact_cosines(tmp_path: Path) -> None:
    db, index, _ = _store(tmp_path, 3000)
    seqs = list(range(1, 3001))
    for q in _unit(10, 64, 7):
        exact = db.read(lambda c, q=q: exact_cosines(c, q, seqs, 64))
        truth = sorted(exact.items(), key=lambda kv: (-kv[1], kv[0]))[:40]
        got = db.read(lambda c, q=q: index.search(c, q, 40))
        assert [s for s, _ in got] == [s for s, _ in truth]
        for s, sim in got:
            assert sim == pytest.approx(exact[s], abs=1e-5)


def test_a_change_of_the_vectors_is_seen_by_the_next_search(tmp_path: Path) -> None:
    """Added, replaced and removed vectors: the copy is reloaded in the search's snapshot."""
    db, index, _ = _store(tmp_path, 50)
    q = _unit(1, 64, 9)[0]
    before = db.read(lambda c: index.search(c, q, 1))
    _put(db, index, [51], q[None, :])  # a new memory exactly at the ask
    assert db.read(lambda c: index.search(c, q, 1)) == [(51, pytest.approx(1.0, abs=1e-5))]
    _put(db, index, [51], -q[None, :])  # the same memory re-embedded far from it
    assert db.read(lambda c: index.search(c, q, 1))[0][0] != 51
    db.write(lambda c: c.execute("DELETE FROM memory_vectors WHERE seq=?", (before[0][0],)))
    assert before[0][0] not in {s for s, _ in db.read(lambda c: index.search(c, q, 50))}


def test_commits_to_other_tables_keep_the_copy(tmp_path: Path) -> None:
    """One accounting row per request must not reload every vector of the store."""
    db, index, _ = _store(tmp_path, 50)
    q = _unit(1, 64, 9)[0]
    db.read(lambda c: index.search(c, q, 5))
    kept = index._copy
    db.write(lambda c: c.execute("UPDATE memories SET access_count = access_count + 1"))
    db.read(lambda c: index.search(c, q, 5))
    assert index._copy is kept


def test_a_store_past_the_bound_is_searched_through_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matrix, "MAX_ROWS", 100)
    db, index, data = _store(tmp_path, 300)
    got = db.read(lambda c: index.search(c, data[4], 3))
    assert got[0] == (5, pytest.approx(1.0, abs=1e-5))  # found, by the index below
    assert index._copy is not None and index._copy.rows is None  # nothing kept in memory


def test_a_store_searches_and_forgets_through_the_matrix(tmp_path: Path) -> None:
    with HierarchicalMemory(tmp_path / "ember.db", HashEmbedder()) as m:
        redis = m.add("The cache is Redis 7")
        m.add("Deploys go to fly.io")
        assert [h.memory.id for h in m.search("redis cache", top_k=1)] == [redis.id]
        m.delete(redis.id)
        assert redis.id not in {h.memory.id for h in m.search("redis cache")}


def test_added_rows_are_appended_and_other_changes_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact stored while agents ask costs a read of the new rows, not of every row."""
    db, index, _ = _store(tmp_path, 50)
    loads: list[int] = []
    real = matrix._load

    def counted(*args: object) -> object:
        loads.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(matrix, "_load", counted)
    q = _unit(1, 64, 9)[0]
    db.read(lambda c: index.search(c, q, 5))
    assert len(loads) == 1
    _put(db, index, [51, 52], np.stack([q, -q]))
    assert db.read(lambda c: index.search(c, q, 1))[0][0] == 51
    assert len(loads) == 1 and len(index._copy.seqs) == 52  # type: ignore[union-attr]
    _put(db, index, [51], -q[None, :])  # a stored row replaced: the copy is reloaded
    assert db.read(lambda c: index.search(c, q, 1))[0][0] not in (51, 52)
    assert len(loads) == 2


def test_a_database_from_before_the_added_counter_gets_it_and_stays_exact(
    tmp_path: Path,
) -> None:
    """``memory_0003`` shipped counting inserts as changes; ``memory_0004`` adds the counter
    of added rows to such a file instead of editing the migration it already applied."""
    from ember.store.migrations import Schema

    older = Schema(
        "project", tuple(m for m in PROJECT.migrations if m.name != "memory_0004_vector_added")
    )
    before = Database(tmp_path / "ember.db", older, vec=True)
    assert before.read(matrix._version) is None  # no vector_added: the index answers
    before.close()
    db, index, _ = _store(tmp_path, 30)  # the same file, now with every migration
    q = _unit(1, 64, 11)[0]
    assert db.read(matrix._version) is not None
    _put(db, index, [31], q[None, :])
    assert db.read(lambda c: index.search(c, q, 1))[0][0] == 31
    _put(db, index, [31], -q[None, :])  # replaced: counted as a change, the copy reloads
    assert db.read(lambda c: index.search(c, q, 1))[0][0] != 31
