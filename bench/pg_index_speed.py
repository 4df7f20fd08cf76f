"""Memory indexes on PostgreSQL against SQLite's, side by side at each size (issue #24).

For each size in ``--sizes``: the same ~10-word facts (``memory_data.short_memories``) indexed
in SQLite (FTS5; sqlite-vec over float32 rows) and in a throwaway PostgreSQL 16 with pgvector
(``ember.testing.postgres``: ``memory_terms`` BM25; pgvector HNSW), then ``--queries`` asks,
interleaved backend by backend, each timed on its own:

* keyword: the shipped candidate query (``search``: the postings budget, then BM25, top 40);
* vector: the index's top 40 for a random unit query (candidates, then exact cosines).

The vectors are the shipped embedder's, of those facts and asks (kept in ``--cache`` between
runs: embedding 100k facts takes minutes), so the recall@10 of each index against exact
search, printed beside, is what real memories get. The HNSW graph is built after the load, as
a bulk import would (one insert at a time into a graph ran at ~200 rows/s). Both stores are
vacuumed and analysed before the asks. Prints p50 / p99 per cell and the PostgreSQL / SQLite
ratio. Every loop is bounded by a count; the server is on loopback (a unix socket) and
removed at the end.

After each size, what the indexes take on disk (PostgreSQL: each table with its indexes and
TOAST; SQLite: the file) in all and per memory: the basis of ``docs/scale.md``'s estimate of
1M memories.

    python bench/pg_index_speed.py [--sizes 10000,100000] [--queries 200] [--cache DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from ember.memory.index.base import put_vectors, top_k
from ember.memory.index.fts import FtsIndex, query_terms
from ember.memory.index.pg_text import DDL, PgTextIndex
from ember.memory.index.pgvector import PgVectorIndex
from ember.memory.index.sqlite_vec import SqliteVecIndex
from ember.store.database import Database
from ember.store.migrations import Migration, Schema
from ember.store.pg.connection import PgConnection
from ember.testing.postgres import postgres_server
from memory_data import search_queries, short_memories

DIM = 384
BATCH = 2000
#: The two indexes' tables alone (the project schema's memory_vectors wants memory rows).
BARE = Schema(
    "bench",
    [
        Migration(
            "bench_0001",
            "CREATE VIRTUAL TABLE memory_fts USING fts5(content, tokenize = 'porter unicode61')",
        ),
        Migration(
            "bench_0002", "CREATE TABLE memory_vectors (seq INTEGER PRIMARY KEY, vector BLOB)"
        ),
    ],
)


def vectors_of(texts: list[str], cache: Path, name: str) -> np.ndarray:  # type: ignore[type-arg]
    """The shipped embedder's unit vectors of ``texts``, from ``cache`` when there."""
    path = cache / f"{name}-{len(texts)}.npy"
    if path.exists():
        return np.load(path)  # type: ignore[no-any-return]
    from ember.embedder import get_embedder

    embedder = get_embedder()
    out = np.concatenate([embedder.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out.astype(np.float32))
    return out.astype(np.float32)


def fill_sqlite(db: Database, texts: list[str], vectors: np.ndarray) -> None:  # type: ignore[type-arg]
    index = SqliteVecIndex(DIM)
    db.write(index.ensure)
    for start in range(0, len(texts), BATCH):
        seqs = list(range(start + 1, min(start + BATCH, len(texts)) + 1))
        chunk, vecs = texts[start : start + BATCH], vectors[start : start + BATCH]

        def job(c: Any, seqs: list[int] = seqs, chunk: list[str] = chunk, vecs: Any = vecs) -> None:
            FtsIndex().add(c, seqs, chunk)
            put_vectors(c, seqs, vecs)
            index.add(c, seqs, vecs)

        db.write(job)


def fill_pg(conn: PgConnection, texts: list[str], vectors: np.ndarray) -> None:  # type: ignore[type-arg]
    conn.execute(DDL)
    conn.execute("CREATE TABLE memory_vectors (seq BIGINT PRIMARY KEY, vector BYTEA NOT NULL)")
    index = PgVectorIndex(DIM)
    index.ensure(conn)
    conn.execute("DROP INDEX memory_vec_hnsw")  # built once, after the load
    for start in range(0, len(texts), BATCH):
        seqs = list(range(start + 1, min(start + BATCH, len(texts)) + 1))
        with conn.transaction():
            PgTextIndex().add(conn, seqs, texts[start : start + BATCH])
            put_vectors(conn, seqs, vectors[start : start + BATCH])
            index.add(conn, seqs, vectors[start : start + BATCH])
    index.ensure(conn)
    conn.execute("VACUUM ANALYZE")


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]


def one_size(url: str, n: int, n_queries: int, root: Path, cache: Path) -> list[str]:
    texts = short_memories(n)
    vectors = vectors_of(texts, cache, "facts")
    db = Database(root / f"s{n}.db", BARE, vec=True)
    conn = PgConnection(psycopg.connect(url, autocommit=True))
    try:
        t0 = time.perf_counter()
        fill_sqlite(db, texts, vectors)
        t1 = time.perf_counter()
        fill_pg(conn, texts, vectors)
        t2 = time.perf_counter()
        asks = search_queries(n_queries)
        terms = [query_terms([q]) for q in asks]
        queries = vectors_of(asks, cache, "asks")
        cells: dict[str, list[float]] = {
            k: [] for k in ("kw sqlite", "kw pg", "vec sqlite", "vec pg")
        }
        hits = {"sqlite": 0, "pg": 0}
        sqlite_vec, pg_vec = SqliteVecIndex(DIM), PgVectorIndex(DIM)
        for t, q in zip(terms, queries, strict=True):
            cells["kw sqlite"].append(
                timed(lambda t=t: db.read(lambda c: FtsIndex().search(c, t, 40)))
            )
            cells["kw pg"].append(timed(lambda t=t: PgTextIndex().search(conn, t, 40)))
            found: dict[str, list[tuple[int, float]]] = {}

            def lite(q: Any = q, out: dict[str, Any] = found) -> None:
                out["sqlite"] = db.read(lambda c: sqlite_vec.search(c, q, 40))

            def pg(q: Any = q, out: dict[str, Any] = found) -> None:
                with conn.transaction():
                    out["pg"] = pg_vec.search(conn, q, 40)

            cells["vec sqlite"].append(timed(lite))
            cells["vec pg"].append(timed(pg))
            exact = {s for s, _ in top_k(dict(enumerate((vectors @ q).tolist(), start=1)), 10)}
            for side in hits:
                hits[side] += len({s for s, _ in found[side][:10]} & exact)
        sizes = on_disk(conn, db, n)
    finally:
        conn.close()
        db.close()
    out = [
        f"{n:>7} memories: filled SQLite in {t1 - t0:.1f} s, PostgreSQL in {t2 - t1:.1f} s; "
        f"recall@10 against exact: sqlite-vec {hits['sqlite'] / (10 * n_queries):.3f}, "
        f"pgvector {hits['pg'] / (10 * n_queries):.3f}"
    ]
    for side in ("kw", "vec"):
        s, p = cells[f"{side} sqlite"], cells[f"{side} pg"]
        out.append(
            f"  {'keyword (BM25 top 40)' if side == 'kw' else 'vector (top 40)':<24}"
            f"sqlite p50 {statistics.median(s):6.2f} ms p99 {pct(s, 0.99):6.2f} | "
            f"postgres p50 {statistics.median(p):6.2f} ms p99 {pct(p, 0.99):6.2f} | "
            f"ratio p50 {statistics.median(p) / statistics.median(s):5.2f}"
        )
    return out + sizes


def on_disk(conn: PgConnection, db: Database, n: int) -> list[str]:
    """Bytes of each PostgreSQL index table (indexes and TOAST included) and of the SQLite
    file with its WAL, in all and per memory."""
    rows = conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
        "WHERE c.relkind = 'r' AND c.relname LIKE 'memory\\_%' ORDER BY 2 DESC"
    ).fetchall()
    graph = conn.execute("SELECT pg_relation_size('memory_vec_hnsw')").fetchone()
    wal = db.path.with_name(db.path.name + "-wal")
    lite = db.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    total = sum(int(r[1]) for r in rows)
    parts = ", ".join(f"{r[0]} {int(r[1]) / 1e6:.1f} MB" for r in rows)
    return [
        f"  on disk: postgres {total / 1e6:.1f} MB ({total / n:.0f} B/memory: {parts}; "
        f"the HNSW graph {int(graph[0]) / 1e6:.1f} MB), sqlite file {lite / 1e6:.1f} MB "
        f"({lite / n:.0f} B/memory)"
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ember-bench" / "pg")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp, postgres_server() as server:
        for n in sizes:
            with server.fresh_database() as url:
                for line in one_size(url, n, args.queries, Path(tmp), args.cache):
                    print(line, flush=True)


if __name__ == "__main__":
    main()
