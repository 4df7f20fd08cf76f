"""The vector index on PostgreSQL: pgvector's HNSW for candidates, exact cosines to rank.

The same two stages as ``SqliteVecIndex``, and the same second one: candidates come from an
HNSW graph over ``vector(dim)`` (cosine distance), then every candidate's cosine is computed
from its float32 row in ``memory_vectors`` with numpy (``base.exact_cosines``), exactly as on
SQLite. So a memory found on both backends scores the very same float, and the calibrated
floor means the same thing on PostgreSQL (what ``<=>`` returns is computed in another
precision, and ranking by it would move hits across the floor).

Invariants:
- Membership is ``VectorIndex``'s: ``add``/``remove`` run inside the caller's transaction,
  so a rolled-back memory leaves no row in ``memory_vec``.
- The graph is searched with ``hnsw.ef_search`` twice the candidates asked for, set for that
  one transaction: pgvector returns at most ``ef_search`` rows (with its default of 40 a
  search for 100 candidates came back with 40), and at exactly the candidates asked for,
  recall@10 at 100k memories was 0.964 against sqlite-vec's 0.985
  (``bench/pg_index_speed.py``).
- pgvector's names (its type, its ``<=>``, its operator class) are said with the schema the
  extension was created in, found by ``ensure``: a project's transactions search only the
  project's schema (``SET LOCAL search_path``), where ``vector`` alone does not exist.
- A vector goes to the server as text (``[x,y,...]`` with 9 significant digits, which a
  float32 survives exactly): no adapter package, and the exact float32 stays in
  ``memory_vectors`` anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.memory.errors import VectorIndexUnavailable
from ember.memory.index.base import Vectors, exact_cosines, top_k
from ember.memory.index.sqlite_vec import coarse_for

#: The widest graph search (pgvector's own limit is 1000).
EF_SEARCH_MAX = 1000


def ddl(dim: int, ext: str = "") -> str:
    """The table and its graph, at the embedder's dimension; ``ext``: pgvector's schema as a
    qualifier (``"public".``), empty when the search path finds it."""
    return (
        "CREATE TABLE IF NOT EXISTS memory_vec (seq BIGINT PRIMARY KEY, "
        f"embedding {ext}vector({dim})); CREATE INDEX IF NOT EXISTS memory_vec_hnsw ON "
        f"memory_vec USING hnsw (embedding {ext}vector_cosine_ops);"
    )


def extension_schema(conn: Any) -> str:
    """The quoted schema pgvector was created in, as a qualifier (``"public".``). Raises
    ``VectorIndexUnavailable`` when the database lacks the extension: the memories would
    otherwise fail on every write with "type vector does not exist"."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
        "ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise VectorIndexUnavailable(
            "the PostgreSQL database has no pgvector: run CREATE EXTENSION vector in it once "
            "(as a user allowed to), then restart ember"
        )
    return '"' + str(row[0]).replace('"', '""') + '".'


def as_text(vector: Vectors) -> str:
    """pgvector's text form of one vector (float32 round-trips through 9 digits)."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


class PgVectorIndex:
    """Stateless but for its dimension and where pgvector lives (found by ``ensure``): the
    graph is in the project's schema and commits or rolls back with the memory rows."""

    name = "pgvector"

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._ext = ""  # pgvector's schema as a qualifier, once ``ensure`` found it

    def ensure(self, conn: Any) -> None:
        """Find pgvector's schema, and create the table and its graph (a write)."""
        self._ext = extension_schema(conn)
        conn.execute(ddl(self._dim, self._ext))

    def add(self, conn: Any, seqs: Sequence[int], vectors: Vectors) -> None:
        conn.executemany(
            f"INSERT INTO memory_vec (seq, embedding) VALUES (?, ?::{self._ext}vector) "
            "ON CONFLICT (seq) DO UPDATE SET embedding = EXCLUDED.embedding",
            [(s, as_text(v)) for s, v in zip(seqs, np.atleast_2d(vectors), strict=True)],
        )

    def remove(self, conn: Any, seqs: Sequence[int]) -> None:
        if seqs:
            conn.execute("DELETE FROM memory_vec WHERE seq = ANY(?)", (list(seqs),))

    def search(self, conn: Any, vector: Vectors, k: int) -> list[tuple[int, float]]:
        top = conn.execute("SELECT max(seq) FROM memory_vec").fetchone()
        coarse = coarse_for(k, int(top[0]) if top and top[0] is not None else 0)
        conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(2 * coarse, 100), EF_SEARCH_MAX)}")
        rows = conn.execute(
            f"SELECT seq FROM memory_vec ORDER BY embedding OPERATOR({self._ext}<=>) "
            f"?::{self._ext}vector LIMIT ?",
            (as_text(vector), coarse),
        ).fetchall()
        sims = exact_cosines(conn, vector, [int(r[0]) for r in rows], self._dim)
        return top_k(sims, k)

    def commit(self) -> None:
        """Nothing to do: the graph is in the same transaction."""

    def rollback(self) -> None:
        """Nothing to do: PostgreSQL rolled the graph back with the rows."""

    def reset(self, conn: Any) -> None:
        """Recreate the table empty, at this index's dimension (the embedder changed)."""
        conn.execute("DROP TABLE IF EXISTS memory_vec")
        conn.execute(ddl(self._dim, self._ext))

    def close(self) -> None:
        """Nothing held."""
