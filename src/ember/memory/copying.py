"""The memory indexes rebuilt from copied rows (``ember store copy``).

The copy moves ``memories`` and ``memory_vectors`` row for row and never the indexes: FTS5's
table and sqlite-vec's on SQLite, ``memory_terms``/``memory_doclen``/``memory_text_stats`` and
``memory_vec`` on PostgreSQL are each the other backend's stranger. ``rebuild`` adds to the
target's indexes every current memory and every stored vector they lack, with the indexes'
own ``add`` (the same postings, stems and codes a write would have made), in the copy's
transaction.

Invariants, and what each prevents:

- It adds only what is missing (by seq): a second copy adds nothing, and a copy into a store
  already in use leaves its entries alone.
- Index membership stays the store's: the text index holds the current memories, the vector
  index the rows of ``memory_vectors`` (``index/base.py``).
- pgvector's HNSW graph is built once after a bulk load (``BULK`` rows or more, a large
  share of the graph), not grown one insert at a time: at 10k vectors that is the
  difference between seconds and a minute.
- When vectors were copied, ``vector_generation`` is bumped (an hnswlib fallback file of the
  target, ``index/hnsw.py``, is rebuilt from ``memory_vectors``) and ``vector_changes`` too:
  the matrix of a process reading the target (``index/matrix.py``) reloads. SQLite's
  trigger counts each copied row as an addition, which the matrix appends only past its
  last seq; a copied seq below the target's own would be missed for good.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ember.memory import rows
from ember.memory.index.fts import FtsIndex
from ember.memory.index.pg_text import PgTextIndex
from ember.memory.index.pgvector import PgVectorIndex
from ember.memory.index.sqlite_vec import SqliteVecIndex
from ember.store.driver import errors
from ember.store.sql import dialect

#: Rows added per call of an index's ``add``.
CHUNK = 1000
#: From this many vectors on, pgvector's graph is dropped and built after the load...
BULK = 1000
#: ...when they are at least this share of the graph after: a build took ~4,000 rows/s and
#: inserts into a built graph ~200 rows/s (``bench/pg_index_speed.py``), so a build over
#: everything costs less than inserting the new rows once they are past 1/20 of it.
BULK_SHARE = 1 / 20


def derived() -> dict[str, str]:
    return {
        "memory_terms": "keyword index: rebuilt from the copied memories",
        "memory_doclen": "keyword index: rebuilt from the copied memories",
        "memory_text_stats": "keyword index: rebuilt from the copied memories",
        "memory_vec": "vector index: rebuilt from the copied vectors",
    }


def rebuilder() -> Callable[[Any, Mapping[str, int]], Mapping[str, int]]:
    return rebuild


def _has_table(conn: Any, name: str) -> bool:
    if dialect(conn) == "postgres":
        sql = "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
    else:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(sql, (name,)).fetchone() is not None


def _has_vec(conn: Any) -> bool:
    """Whether sqlite-vec is loaded on ``conn`` (a failed prepare leaves the transaction)."""
    try:
        conn.execute("SELECT vec_version()").fetchone()
    except errors.Error:
        return False
    return True


def rebuild(conn: Any, copied: Mapping[str, int]) -> dict[str, int]:
    """Add to the target's indexes what its rows lack; how many, by index. ``copied``: the
    rows the copy added now, by table."""
    if not _has_table(conn, "memories"):
        return {}
    done = {"memory text index": _text(conn)}
    key = rows.meta_get(conn, "embedder")
    dim = key.rsplit(":", 1)[-1] if key else ""
    if dim.isdigit():
        done["memory vector index"] = _vectors(conn, int(dim))
    if copied.get("memory_vectors"):
        rows.bump_generation(conn)
        # SQLite's trigger counts every insert as an addition, which a reader's matrix only
        # appends past its last seq: a copied seq below the target's own would be missed
        conn.execute(
            "UPDATE memory_meta SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) "
            "WHERE key = 'vector_changes'"
        )
    return done


def _text(conn: Any) -> int:
    postgres = dialect(conn) == "postgres"
    index = PgTextIndex() if postgres else FtsIndex()
    indexed = (
        "SELECT 1 FROM memory_doclen d WHERE d.seq = m.seq"
        if postgres
        else "SELECT 1 FROM memory_fts f WHERE f.rowid = m.seq"
    )
    found = conn.execute(
        f"SELECT m.seq, m.content FROM memories m WHERE m.valid_until IS NULL "
        f"AND NOT EXISTS ({indexed}) ORDER BY m.seq"
    ).fetchall()
    for i in range(0, len(found), CHUNK):
        part = found[i : i + CHUNK]
        index.add(conn, [int(r[0]) for r in part], [str(r[1]) for r in part])
    return len(found)


def _vectors(conn: Any, dim: int) -> int:
    """Index the stored vectors the vector index lacks (none on a SQLite connection without
    sqlite-vec: its hnswlib fallback rebuilds from ``memory_vectors`` by itself)."""
    if dialect(conn) == "postgres":
        pg = PgVectorIndex(dim)
        pg.ensure(conn)
        index: PgVectorIndex | SqliteVecIndex = pg
        indexed = "SELECT 1 FROM memory_vec i WHERE i.seq = v.seq"
    else:
        if not _has_vec(conn):
            return 0
        index = SqliteVecIndex(dim)
        index.ensure(conn)
        indexed = "SELECT 1 FROM memory_vec_rowids i WHERE i.rowid = v.seq"
    found = [
        (int(r[0]), bytes(r[1]))
        for r in conn.execute(
            f"SELECT v.seq, v.vector FROM memory_vectors v WHERE NOT EXISTS ({indexed}) "
            "ORDER BY v.seq"
        ).fetchall()
        if len(r[1]) == dim * 4
    ]
    bulk = isinstance(index, PgVectorIndex) and len(found) >= BULK
    if bulk:
        row = conn.execute("SELECT count(*) FROM memory_vec").fetchone()
        bulk = len(found) >= BULK_SHARE * (int(row[0]) + len(found))
    if bulk:
        conn.execute("DROP INDEX IF EXISTS memory_vec_hnsw")
    for i in range(0, len(found), CHUNK):
        part = found[i : i + CHUNK]
        vectors = np.frombuffer(b"".join(b for _, b in part), dtype=np.float32).reshape(-1, dim)
        index.add(conn, [s for s, _ in part], vectors)
    if bulk:
        index.ensure(conn)  # the graph, built once over every row
    return len(found)
