"""The vector index on PostgreSQL (issue #24): pgvector's graph finds the candidates, and the
scores are the exact float32 cosines SQLite's index gives, so the calibrated floor holds on
both backends. Against a real PostgreSQL with pgvector (``pg_url``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from ember.memory.index.base import exact_cosines, put_vectors, top_k
from ember.memory.index.pgvector import PgVectorIndex, as_text
from ember.store.pg.connection import PgConnection

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

DIM = 384


def _unit(n: int, seed: int) -> np.ndarray:  # type: ignore[type-arg]
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def conn(pg_url: str) -> Iterator[PgConnection]:
    c = PgConnection(psycopg.connect(pg_url, autocommit=True))
    c.execute("CREATE TABLE memory_vectors (seq BIGINT PRIMARY KEY, vector BYTEA NOT NULL)")
    PgVectorIndex(DIM).ensure(c)
    try:
        yield c
    finally:
        c.close()


def _add(conn: PgConnection, seqs: list[int], vectors: np.ndarray) -> None:  # type: ignore[type-arg]
    with conn.transaction():
        put_vectors(conn, seqs, vectors)
        PgVectorIndex(DIM).add(conn, seqs, vectors)


def _search(conn: PgConnection, q: np.ndarray, k: int) -> list[tuple[int, float]]:  # type: ignore[type-arg]
    with conn.transaction():  # ef_search is set for the search's own transaction
        return PgVectorIndex(DIM).search(conn, q, k)


def test_it_finds_the_exact_top_k_with_sqlites_own_numbers(conn: PgConnection) -> None:
    vectors = _unit(2000, seed=1)
    seqs = list(range(1, 2001))
    _add(conn, seqs, vectors)
    found = 0
    for q in _unit(20, seed=2):
        truth = exact_cosines(conn, q, seqs, DIM)
        exact = top_k(truth, 40)
        got = _search(conn, q, 40)
        assert len(got) == 40
        assert [x for _, x in got] == sorted((x for _, x in got), reverse=True)
        assert all(truth[s] == x for s, x in got)  # the very same float32 cosine
        found += len({s for s, _ in got[:10]} & {s for s, _ in exact[:10]})
    assert found / (20 * 10) >= 0.99  # recall@10 of the graph's candidates


def test_remove_upsert_rollback_and_reset(conn: PgConnection) -> None:
    vectors = _unit(3, seed=3)
    _add(conn, [1, 2, 3], vectors)
    index = PgVectorIndex(DIM)
    with conn.transaction():
        index.remove(conn, [1])
    assert {s for s, _ in _search(conn, vectors[0], 3)} == {2, 3}
    _add(conn, [2], vectors[:1])  # seq 2 now holds the first vector
    assert _search(conn, vectors[0], 1)[0][0] == 2
    with pytest.raises(RuntimeError), conn.transaction():
        index.add(conn, [9], vectors[2:3])
        raise RuntimeError("the memory's write failed")
    assert 9 not in {s for s, _ in _search(conn, vectors[2], 3)}
    with conn.transaction():
        index.reset(conn)
    assert _search(conn, vectors[2], 3) == []


def test_text_form_round_trips_float32_exactly() -> None:
    v = _unit(1, seed=4)[0]
    back = np.array([float(x) for x in as_text(v)[1:-1].split(",")], dtype=np.float32)
    assert np.array_equal(back, v)
