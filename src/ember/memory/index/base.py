"""The vector index interface, and the float32 vector table both implementations share.

Index membership invariant: a ``seq`` is in the vector index <=> it has a row in
``memory_vectors`` <=> the memory is current and embedded. ``HierarchicalMemory`` keeps it by
calling ``add``/``remove`` inside the same transaction that changes the memory row; an index
whose state lives outside SQLite (hnsw) stages its changes and applies them only on
``commit`` so a rolled-back transaction leaves no ghost vector behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ember.store.driver import Connection
from ember.store.sql import dialect

Vectors = npt.NDArray[np.float32]


class VectorIndex(Protocol):
    """Writes (``add``, ``remove``, ``reset``) run on the database's writer thread with its
    connection, inside the caller's transaction; ``search`` runs on a reader connection."""

    name: str

    def add(self, conn: Connection, seqs: Sequence[int], vectors: Vectors) -> None:
        """Index ``vectors`` (unit rows) under ``seqs``, inside the caller's transaction."""

    def remove(self, conn: Connection, seqs: Sequence[int]) -> None:
        """Drop ``seqs`` (true delete), inside the caller's transaction."""

    def search(self, conn: Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
        """Up to ``k`` (seq, cosine) pairs, best first, ties by seq."""

    def commit(self) -> None:
        """The caller's transaction committed: make staged changes visible."""

    def rollback(self) -> None:
        """The caller's transaction rolled back: forget staged changes."""

    def reset(self, conn: Connection) -> None:
        """Drop everything (the embedder changed; vectors are about to be rebuilt)."""

    def close(self) -> None: ...


def put_vectors(conn: Connection, seqs: Sequence[int], vectors: Vectors) -> None:
    rows = [
        (s, np.ascontiguousarray(v, dtype=np.float32).tobytes())
        for s, v in zip(seqs, vectors, strict=True)
    ]
    if dialect(conn) == "postgres":
        conn.executemany(
            "INSERT INTO memory_vectors (seq, vector) VALUES (?, ?) "
            "ON CONFLICT (seq) DO UPDATE SET vector = EXCLUDED.vector",
            rows,
        )
    else:
        conn.executemany("INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)", rows)


def drop_vectors(conn: Connection, seqs: Sequence[int]) -> None:
    conn.executemany("DELETE FROM memory_vectors WHERE seq=?", [(s,) for s in seqs])


def _vector_blobs(conn: Connection, seqs: Sequence[int], dim: int) -> Iterator[tuple[int, bytes]]:
    """``(seq, blob)`` of each stored vector of ``seqs`` that has ``dim`` floats, 500 a query."""
    for start in range(0, len(seqs), 500):
        chunk = seqs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for seq, blob in conn.execute(
            f"SELECT seq, vector FROM memory_vectors WHERE seq IN ({marks})", tuple(chunk)
        ):
            if len(blob) == dim * 4:
                yield int(seq), bytes(blob)


def get_vectors(conn: Connection, seqs: Sequence[int], dim: int) -> dict[int, Vectors]:
    return {
        seq: np.frombuffer(blob, dtype=np.float32) for seq, blob in _vector_blobs(conn, seqs, dim)
    }


def exact_cosines(
    conn: Connection, query: Vectors, seqs: Sequence[int], dim: int
) -> dict[int, float]:
    """Exact cosine of ``query`` with each stored vector (rows are unit length).

    The blobs are joined into one matrix (copied into numpy's own memory, as ``np.stack``
    would: the same layout, so the same float results) rather than one array per row: a time
    window's 2,000 memories took 6 ms that way."""
    found = list(_vector_blobs(conn, seqs, dim))
    keys = [seq for seq, _ in found]
    blobs = [blob for _, blob in found]
    if not keys:
        return {}
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), dim).copy()
    sims = matrix @ query.astype(np.float32)
    return {k: float(s) for k, s in zip(keys, sims, strict=True)}


def top_k(scored: dict[int, float], k: int) -> list[tuple[int, float]]:
    """Best first; equal scores ordered by seq so the same inputs give the same order."""
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
