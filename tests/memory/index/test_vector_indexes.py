"""The two vector indexes: choice and fallback, recall of the two-stage search, hnsw upkeep."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from ember.memory import HierarchicalMemory, VectorIndexUnavailable
from ember.memory.index.base import exact_cosines, put_vectors
from ember.memory.index.hnsw import HnswIndex
from ember.memory.index.sqlite_vec import SqliteVecIndex
from ember.memory.store import connect, rows
from ember.memory.store.connect import open_memory_db
from tests.memory.conftest import HashEmbedder


def _cant_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "_load_vec", lambda conn: "OperationalError: not authorized")


def test_auto_uses_sqlite_vec_when_it_loads(tmp_path: Path) -> None:
    with HierarchicalMemory(tmp_path / "ember.db", HashEmbedder()) as m:
        m.add("x")
        assert m.index_name == "sqlite-vec"


def test_auto_falls_back_to_hnsw_with_a_warning_when_the_extension_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _cant_load(monkeypatch)
    with (
        caplog.at_level(logging.WARNING),
        HierarchicalMemory(tmp_path / "ember.db", HashEmbedder()) as m,
    ):
        a = m.add("The cache is Redis")
        assert m.index_name == "hnsw"
        assert [h.memory.id for h in m.search("redis cache")] == [a.id]
    assert "sqlite-vec unavailable" in caplog.text


def test_asking_for_sqlite_vec_explicitly_fails_clearly_when_it_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cant_load(monkeypatch)
    with pytest.raises(VectorIndexUnavailable, match="EMBER_MEMORY_VECTOR_INDEX"):
        HierarchicalMemory(tmp_path / "ember.db", HashEmbedder(), vector_index="sqlite-vec")


def _random_unit(n: int, dim: int, seed: int) -> np.ndarray:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", ["sqlite-vec", "hnsw"])
def test_index_search_matches_exact_cosine_on_clustered_vectors(tmp_path: Path, kind: str) -> None:
    db = open_memory_db(tmp_path / "ember.db", "hnsw" if kind == "hnsw" else "sqlite-vec")
    conn = db.conn
    conn.execute("PRAGMA foreign_keys=OFF")  # vectors without memory rows: the index alone
    centers = _random_unit(50, 64, 1)
    rng = np.random.default_rng(2)
    data = centers[rng.integers(0, 50, 3000)] + 0.35 * _random_unit(3000, 64, 3)
    data = (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)
    seqs = list(range(1, 3001))
    index = (
        SqliteVecIndex(conn, 64)
        if kind == "sqlite-vec"
        else HnswIndex(conn, 64, tmp_path / "memory.hnsw", lambda: 0)
    )
    conn.execute("BEGIN")
    put_vectors(conn, seqs, data)
    index.add(seqs, data)
    conn.execute("COMMIT")
    index.commit()
    recall = []
    for q in _random_unit(20, 64, 4) * 0.3 + centers[:20]:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        exact = exact_cosines(conn, q, seqs, 64)
        truth = {s for s, _ in sorted(exact.items(), key=lambda kv: -kv[1])[:10]}
        got = index.search(q, 10)
        recall.append(len(truth & {s for s, _ in got}) / 10)
        for s, sim in got:  # scores are exact cosines, not approximations
            assert sim == pytest.approx(exact[s], abs=1e-5)
    assert np.mean(recall) >= 0.9


def test_hnsw_rollback_leaves_no_ghost_vector(tmp_path: Path) -> None:
    db = open_memory_db(tmp_path / "ember.db", "hnsw")
    index = HnswIndex(db.conn, 384, tmp_path / "memory.hnsw", lambda: 0)
    v = HashEmbedder().embed(["ghost"])
    index.add([7], v)
    index.rollback()
    assert index.search(v[0], 5) == []


def test_hnsw_rebuilds_from_the_table_when_its_file_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "ember.db"
    with HierarchicalMemory(path, HashEmbedder(), vector_index="hnsw") as m:
        a = m.add("alpha fact about kafka")
    # A second writer (the CLI) adds a fact; the graph file saved above does not know it.
    with HierarchicalMemory(path, HashEmbedder(), vector_index="hnsw") as m2:
        b = m2.add("beta fact about kafka topics")
        m2._vectors._index._unsaved = 0  # type: ignore[union-attr]  # simulate a crash: no save
    gen = int(rows.meta_get(open_memory_db(path, "hnsw").conn, "vector_generation") or 0)
    assert gen > 0
    with HierarchicalMemory(path, HashEmbedder(), vector_index="hnsw") as m3:
        found = {h.memory.id for h in m3.search("kafka topics fact", fusion="vector")}
        assert found == {a.id, b.id}


def test_missing_hnswlib_fallback_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hnswlib", None)
    db = open_memory_db(tmp_path / "ember.db", index="hnsw")
    with pytest.raises(VectorIndexUnavailable, match=r"pip install 'ember\[hnsw\]'"):
        HnswIndex(db.conn, 8, tmp_path / "memory.hnsw", lambda: 0)
