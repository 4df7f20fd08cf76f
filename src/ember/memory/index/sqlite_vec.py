"""The sqlite-vec index: binary codes in a ``vec0`` table, exact cosine re-ranking.

Why sqlite-vec first (over hnswlib): deletes are real deletes (no tombstones growing the
index), memory is bounded by SQLite's page cache, and the index is in the project file, so it
survives a restart and commits or rolls back with the memory rows — no rebuild, no drift.

Why binary codes: a brute-force ``float[384]`` scan in ``vec0`` costs ~0.45 us per vector
(~45 ms at 100k memories, measured), past the search budget. The sign bit of each dimension
(48 bytes per vector) scans ~8x faster by Hamming distance; the best ``coarse`` candidates are
then re-ranked by exact cosine from ``memory_vectors``. ``vec0``'s top-k costs grow with k
(~13 ms for 100 candidates at 100k memories, ~56 ms for 400): the scan costs memories x
candidates. So the candidate count is ``coarse_for``: 10 per result wanted as far as a fixed
amount of scan work allows, never fewer than 100 or than 2 per result. A search asks for 40
results; with 100 candidates only 80-95% of the exact top 40 came back on real turns (agent
logs, chats: long texts, where sign bits say less). A small store affords the 400 that bring
it to 95-99%; at 100k the count stays 100 (recall@10 0.99 on ~10-word memories).
``bench/memory_search.py`` prints the recall against exact search every run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.memory.index.base import Vectors, exact_cosines, top_k
from ember.store.driver import Connection

#: The minimum number of Hamming candidates re-ranked exactly (see module docstring).
MIN_COARSE = 100
#: Hamming candidates per result wanted, when the scan work allows.
OVERSAMPLE = 10
#: Memories x candidates one search may scan for more than the minimum (vec0 measured ~9 ms for
#: 10k x 400 and ~18 ms for 100k x 100 on the bench machine).
SCAN_WORK = 2_000_000


def coarse_for(k: int, memories: int) -> int:
    """Hamming candidates for a top-``k`` search over ``memories`` codes (module docstring)."""
    affordable = SCAN_WORK // max(memories, 1)
    return min(max(MIN_COARSE, 2 * k, min(OVERSAMPLE * k, affordable)), 4096)


def sign_code(vectors: Vectors) -> list[bytes]:
    """Sign-bit codes (1 bit per dimension) for ``vec0``'s ``bit[]`` column."""
    bits = np.packbits(np.atleast_2d(vectors) > 0, axis=1)
    return [row.tobytes() for row in bits]


class SqliteVecIndex:
    """Stateless but for its dimension: the ``vec0`` table lives in the project file and
    commits or rolls back with the memory rows."""

    name = "sqlite-vec"

    def __init__(self, dim: int) -> None:
        if dim % 8:
            raise ValueError(f"vector dimension {dim} is not a multiple of 8")
        self._dim = dim

    def ensure(self, conn: Connection) -> None:
        """Create the table (a write: on the writer thread)."""
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec USING vec0(code bit[{self._dim}])"
        )

    def add(self, conn: Connection, seqs: Sequence[int], vectors: Vectors) -> None:
        codes = sign_code(vectors)
        self.remove(conn, seqs)  # vec0 has no upsert
        conn.executemany(
            "INSERT INTO memory_vec (rowid, code) VALUES (?, vec_bit(?))",
            list(zip(seqs, codes, strict=True)),
        )

    def remove(self, conn: Connection, seqs: Sequence[int]) -> None:
        conn.executemany("DELETE FROM memory_vec WHERE rowid=?", [(s,) for s in seqs])

    def search(self, conn: Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
        # The highest rowid bounds the count from above (seqs are never reused) in one seek;
        # count(*) reads every row (~0.9 ms at 100k).
        top = conn.execute("SELECT max(rowid) FROM memory_vec_rowids").fetchone()
        coarse = coarse_for(k, int(top[0]) if top and top[0] is not None else 0)
        rows = conn.execute(
            "SELECT rowid FROM memory_vec WHERE code MATCH vec_bit(?) AND k = ?",
            (sign_code(vector)[0], coarse),
        ).fetchall()
        sims = exact_cosines(conn, vector, [int(r[0]) for r in rows], self._dim)
        return top_k(sims, k)

    def commit(self) -> None:
        """Nothing to do: the index is in the same SQLite transaction."""

    def rollback(self) -> None:
        """Nothing to do: SQLite rolled the index back with the rows."""

    def reset(self, conn: Connection) -> None:
        """Recreate the table empty, at this index's dimension (the embedder changed)."""
        conn.execute("DROP TABLE IF EXISTS memory_vec")
        conn.execute(f"CREATE VIRTUAL TABLE memory_vec USING vec0(code bit[{self._dim}])")

    def close(self) -> None:
        """Nothing held."""
