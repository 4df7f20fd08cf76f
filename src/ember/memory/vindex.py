"""Choosing, creating and filling the vector index of one store.

The index exists once an embedder does (its dimension fixes the index). When it is created:
- pgvector on a PostgreSQL store (``Database.dialect``); on SQLite, sqlite-vec if the database's
  connections loaded the extension, else the hnswlib fallback;
- if the vectors on file came from another embedder (``memory_meta.embedder`` differs), they
  are dropped and the memories re-embedded: vectors of two models are not comparable, and
  mixing them would rank by noise;
- current memories stored while no embedder was available get their vectors (``backfill``).

Every change goes through the database's writer (``Transact``); this object only remembers
which index is in use. Its state is guarded by the store's lock, held by worker threads only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ember.memory import rows
from ember.memory.index.base import VectorIndex, Vectors, put_vectors
from ember.memory.index.hnsw import HnswIndex
from ember.memory.index.matrix import MatrixSearch
from ember.memory.index.pgvector import PgVectorIndex
from ember.memory.index.sqlite_vec import SqliteVecIndex
from ember.memory.vectors import EmbedderSlot, embed
from ember.store.database import Database
from ember.store.driver import Connection

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Run ``fn(conn, index)`` as one exclusive write; ``embed=False`` never loads the model.
Transact = Callable[..., Any]


def _generation(conn: Connection) -> int:
    return int(rows.meta_get(conn, "vector_generation") or 0)


class IndexSlot:
    def __init__(
        self,
        db: Database,
        use_vec: bool,
        transact: Transact,
        embedder: EmbedderSlot,
        lock: threading.RLock,
    ) -> None:
        self._db = db
        self._use_vec = use_vec
        self._transact = transact
        self._embedder = embedder
        self._lock = lock
        self._index: VectorIndex | None = None
        self._key: str | None = None
        self._dim: int | None = None
        self._checked = False  # the live embedder was compared with the one on file

    @property
    def index_name(self) -> str | None:
        return None if self._index is None else self._index.name

    @property
    def dim(self) -> int | None:
        return self._dim

    def embedder_key(self, vec: Vectors | None) -> str | None:
        """The embedder recorded on a row: set only when the row got a vector."""
        return self._key if vec is not None else None

    def index(self, *, embed: bool = True) -> VectorIndex | None:
        """The vector index. ``embed=False`` (deletes, access counts) never loads the model:
        the index is opened at the dimension recorded on file, enough to remove vectors."""
        with self._lock:
            if embed and not self._checked:
                embedder = self._embedder.get()
                if embedder is not None:
                    self._checked = True
                    self._open(f"{embedder.name}:{embedder.dim}", embedder.dim)
                    if self._pending():
                        self.backfill()
                    return self._index
            if self._index is None:
                key = self._db.read(lambda c: rows.meta_get(c, "embedder"))
                dim = key.rsplit(":", 1)[-1] if key else ""
                if key and dim.isdigit():
                    self._open(key, int(dim))
            return self._index

    def _open(self, key: str, dim: int) -> None:
        index = self._index
        if index is None or dim != self._dim:
            if self._index is not None:
                self._index.close()
            index = self._new_index(dim)
        self._index, self._key, self._dim = index, key, dim
        if self._db.read(lambda c: rows.meta_get(c, "embedder")) != key:
            self._reset(key)

    def _new_index(self, dim: int) -> VectorIndex:
        """The index, its searches of a small store answered from memory (``MatrixSearch``).
        The table of pgvector or sqlite-vec is created here, at the embedder's dimension."""
        if self._db.dialect == "postgres":
            graph = PgVectorIndex(dim)
            self._db.write(graph.ensure, label="memory_vec")
            return MatrixSearch(graph, dim)
        if self._use_vec:
            vec = SqliteVecIndex(dim)
            self._db.write(vec.ensure, label="memory_vec")
            return MatrixSearch(vec, dim)
        hnsw = HnswIndex(
            self._db.read, dim, Path(self._db.path).with_name("memory.hnsw"), _generation
        )
        return MatrixSearch(hnsw, dim)

    def _reset(self, key: str) -> None:
        """Vectors on file came from another embedder: drop them all (to be re-embedded)."""

        def reset(conn: Connection, index: VectorIndex | None) -> None:
            if rows.meta_get(conn, "embedder") is not None:
                log.warning("embedder changed to %s: re-embedding %s", key, self._db.where)
            conn.execute("DELETE FROM memory_vectors")
            conn.execute("UPDATE memories SET embedder=NULL WHERE embedder IS NOT NULL")
            if index is not None:
                index.reset(conn)
            rows.meta_set(conn, "embedder", key)
            rows.bump_generation(conn)

        self._transact(reset, embed=False)

    def _pending(self, limit: int = 1) -> list[tuple[int, str]]:
        def pending(conn: Connection) -> list[tuple[int, str]]:
            found = conn.execute(
                "SELECT seq, content FROM memories WHERE valid_until IS NULL "
                "AND (embedder IS NULL OR embedder != ?) ORDER BY seq LIMIT ?",
                (self._key, limit),
            ).fetchall()
            return [(int(r[0]), str(r[1])) for r in found]

        result: list[tuple[int, str]] = self._db.read(pending)
        return result

    def backfill(
        self,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
        *,
        limit: int | None = None,
    ) -> int:
        """Embed current memories without a vector, ``batch`` per transaction, at most
        ``limit`` in all (every one when None); returns how many."""
        embedder = self._embedder.get()
        if embedder is None or self.index() is None or self._key is None:
            return 0
        done = 0
        key = self._key
        while (limit is None or done < limit) and (
            todo := self._pending(batch if limit is None else min(batch, limit - done))
        ):
            vecs = embed(embedder, [c for _, c in todo])
            if vecs is None:
                break
            seqs = [s for s, _ in todo]

            def fill(
                conn: Connection,
                index: VectorIndex | None,
                seqs: list[int] = seqs,
                vecs: Vectors = vecs,
            ) -> None:
                put_vectors(conn, seqs, vecs)
                if index is not None:
                    index.add(conn, seqs, vecs)
                conn.executemany(
                    "UPDATE memories SET embedder=? WHERE seq=?", [(key, s) for s in seqs]
                )
                rows.bump_generation(conn)

            # refused (a store gone away), the facts still lack their vectors and the next
            # catch-up embeds them: nothing is lost, so nothing is counted as dropped
            self._transact(fill, embed=False, retried=True)
            done += len(seqs)
            if progress is not None:
                progress(len(seqs))
        if done:
            log.info("embedded %d memories that had no vector (%s)", done, self._db.where)
        return done

    def external_change(self) -> None:
        """Another connection wrote: an index held outside SQLite must catch up."""
        inner = self._index.inner if isinstance(self._index, MatrixSearch) else self._index
        if isinstance(inner, HnswIndex):
            inner.sync()

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
