"""A store's vectors held in one in-memory matrix: the vector side of a search by one product.

At the sizes a project's memory usually has (hundreds to a few thousand facts), the two-stage
index search (Hamming candidates from ``vec0``, then their float32 rows fetched from
``memory_vectors`` and re-ranked) spent most of a search in SQLite and in copying blobs: 2.4 ms
of a 4.4 ms search at 1,000 memories (py-spy), on every new ask. One matrix product over all of
them is exact — the true top ``k``, never the 95-99% of it the codes bring back — and takes
tens of microseconds.

Invariants:
- Never stale: the copy is tagged with ``memory_meta``'s ``vector_added`` and
  ``vector_changes``, which triggers move with every change of ``memory_vectors``
  (migrations ``memory_0003_vector_changes`` and ``memory_0004_vector_added``), and each
  search reads them in its own snapshot before using the copy. Rows only added (new seqs,
  past every older one) are appended in that same snapshot; any other change reloads the
  copy. Commits to other tables (accounting, one per
  request) leave it alone; a fact stored while agents ask costs one small read, not a reload.
- Bounded: a store with more than ``MAX_ROWS`` vectors (30 MB of float32 at 384 dimensions) is
  searched through the index as before, and nothing is kept.
- Writes are the wrapped index's alone; this class only reads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ember.memory.index.base import VectorIndex, Vectors
from ember.store.driver import Connection

#: The most vectors kept in memory per store (see module doc).
MAX_ROWS = 20_000


@dataclass(frozen=True)
class _Version:
    """``memory_meta``'s two counters (``memory_0003``, ``memory_0004`` migrations)."""

    changes: str
    added: str


@dataclass(frozen=True)
class _Copy:
    """The vectors at one ``version``, in seq order; ``rows`` None: the store held more than
    ``MAX_ROWS`` then (so a larger store counts its rows once per change, not per search)."""

    version: _Version
    seqs: npt.NDArray[np.int64]
    rows: Vectors | None


def _version(conn: Connection) -> _Version | None:
    found = dict(
        conn.execute(
            "SELECT key, value FROM memory_meta WHERE key IN ('vector_changes', 'vector_added')"
        ).fetchall()
    )
    if len(found) < 2:
        return None
    return _Version(str(found["vector_changes"]), str(found["vector_added"]))


def _rows(conn: Connection, dim: int, after: int) -> tuple[list[int], bytes]:
    seqs: list[int] = []
    blobs: list[bytes] = []
    for seq, blob in conn.execute(
        "SELECT seq, vector FROM memory_vectors WHERE seq > ? ORDER BY seq", (after,)
    ):
        if len(blob) == dim * 4:
            seqs.append(int(seq))
            blobs.append(bytes(blob))
    return seqs, b"".join(blobs)


def _load(conn: Connection, dim: int, version: _Version) -> _Copy:
    """Every stored vector of ``dim`` floats (none kept past ``MAX_ROWS``)."""
    top = conn.execute("SELECT count(*) FROM memory_vectors").fetchone()
    if top is None or int(top[0]) > MAX_ROWS:
        return _Copy(version, np.zeros(0, dtype=np.int64), None)
    seqs, blob = _rows(conn, dim, 0)
    rows = np.frombuffer(blob, dtype=np.float32).reshape(len(seqs), dim).copy()
    return _Copy(version, np.asarray(seqs, dtype=np.int64), rows)


def _extend(conn: Connection, dim: int, copy: _Copy, version: _Version) -> _Copy:
    """``copy`` with the rows added since (new seqs only: nothing else changed)."""
    if copy.rows is None:  # past MAX_ROWS when last counted: count again
        return _load(conn, dim, version)
    last = int(copy.seqs[-1]) if len(copy.seqs) else 0
    seqs, blob = _rows(conn, dim, last)
    if len(copy.seqs) + len(seqs) > MAX_ROWS:
        return _load(conn, dim, version)
    more = np.frombuffer(blob, dtype=np.float32).reshape(len(seqs), dim)
    return _Copy(
        version,
        np.concatenate([copy.seqs, np.asarray(seqs, dtype=np.int64)]),
        np.concatenate([copy.rows, more]),
    )


class MatrixSearch:
    """A ``VectorIndex`` whose searches use the in-memory copy when the store is small enough;
    every write, and every search of a larger store, is ``inner``'s."""

    def __init__(self, inner: VectorIndex, dim: int) -> None:
        self.inner = inner
        self.name = inner.name
        self._dim = dim
        self._copy: _Copy | None = None
        self._lock = threading.Lock()

    def add(self, conn: Connection, seqs: Sequence[int], vectors: Vectors) -> None:
        self.inner.add(conn, seqs, vectors)

    def remove(self, conn: Connection, seqs: Sequence[int]) -> None:
        self.inner.remove(conn, seqs)

    def commit(self) -> None:
        self.inner.commit()

    def rollback(self) -> None:
        self.inner.rollback()

    def reset(self, conn: Connection) -> None:
        self.inner.reset(conn)

    def close(self) -> None:
        self._copy = None
        self.inner.close()

    def search(self, conn: Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
        """Up to ``k`` (seq, cosine) pairs, best first, ties by seq (as ``top_k`` orders)."""
        copy = self._current(conn)
        if copy is None or copy.rows is None:
            return self.inner.search(conn, vector, k)
        if not len(copy.seqs) or k <= 0:
            return []
        sims = copy.rows @ vector.astype(np.float32)
        if k < len(sims):
            # Everything tied with the k-th best stays in: the order below breaks ties by seq.
            cut = np.partition(sims, len(sims) - k)[len(sims) - k]
            picked = np.flatnonzero(sims >= cut)
        else:
            picked = np.arange(len(sims))
        pairs = sorted(((int(copy.seqs[i]), float(sims[i])) for i in picked),
                       key=lambda kv: (-kv[1], kv[0]))  # fmt: skip
        return pairs[:k]

    def _current(self, conn: Connection) -> _Copy | None:
        """The copy for this snapshot, brought up to date in it when the vectors changed (only
        appended to when rows were only added); None for a database without the counters
        (then the index answers)."""
        version = _version(conn)
        if version is None:
            return None
        copy = self._copy
        if copy is not None and copy.version == version:
            return copy
        with self._lock:  # searches that find the copy stale update it once, one after another
            copy = self._copy
            if copy is None or copy.version.changes != version.changes:
                copy = _load(conn, self._dim, version)
            elif copy.version != version:
                copy = _extend(conn, self._dim, copy, version)
            self._copy = copy
        return copy
