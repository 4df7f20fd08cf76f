"""The hnswlib fallback index, used when the sqlite-vec extension cannot load.

hnswlib keeps its graph in memory, outside SQLite's transactions, so three rules keep it
consistent with the store:
- changes are staged during a transaction and applied on ``commit`` only (a rolled-back
  insert leaves no vector that points at a row that does not exist);
- ``memory_vectors`` in SQLite is the durable truth; the graph is saved beside the database
  (``memory.hnsw``) together with the ``vector_generation`` it reflects, and rebuilt from the
  table whenever the two disagree (a crash before the save, another process writing);
- deletes are hnswlib tombstones (``mark_deleted``), compacted away by the next rebuild.
Scores are cosines because rows are unit length and the space is inner product.

The graph is shared by the writer thread (``commit``) and the threads that search, so every
use of it holds the index's own lock (in-memory work only; table reads go through the
database's read connections).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ember.fsutil import PRIVATE_FILE, open_private
from ember.memory.errors import VectorIndexUnavailable
from ember.memory.index.base import Vectors, top_k
from ember.store.driver import Connection

log = logging.getLogger(__name__)

_SAVE_EVERY = 500  # applied changes between two saves of the graph file

T = TypeVar("T")
ReadFn = Callable[[Callable[[Connection], Any]], Any]


class HnswIndex:
    name = "hnsw"

    def __init__(
        self,
        read: ReadFn,
        dim: int,
        path: Path,
        generation: Callable[[Connection], int],
    ) -> None:
        try:
            import hnswlib  # type: ignore[import-untyped]
        except ImportError as exc:
            raise VectorIndexUnavailable(
                "the sqlite-vec extension could not load and the hnswlib fallback is not "
                "installed; install it with: pip install 'ember[hnsw]' (needs a C++ compiler)"
            ) from exc

        self._hnswlib: Any = hnswlib
        self._read = read
        self._lock = threading.RLock()
        self._dim = dim
        self._path = path
        self._meta_path = path.with_suffix(".json")
        self._generation = generation
        self._staged: list[tuple[str, Sequence[int], Vectors | None]] = []
        self._live: set[int] = set()
        self._unsaved = 0
        self._loaded_generation = -1
        self._index: Any = None
        self.sync()

    # -- lifecycle ----------------------------------------------------------------------------

    def _current_generation(self) -> int:
        return int(self._read(self._generation))

    def sync(self) -> None:
        """Make the graph match ``memory_vectors``: load the saved file if it is current,
        otherwise rebuild from the table."""
        gen = self._current_generation()
        with self._lock:
            if gen == self._loaded_generation:
                return
            if self._try_load(gen):
                return
            rows = self._read(_all_vectors)
            self._rebuild(rows, gen)

    def _rebuild(self, rows: list[Any], gen: int) -> None:
        # Vectors of another dimension belong to a previous embedder and are about to be reset.
        rows = [r for r in rows if len(r[1]) == 4 * self._dim]
        seqs = [int(r[0]) for r in rows]
        self._index = self._new(max(len(seqs) * 2, 1024))
        if seqs:
            vecs = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
            self._index.add_items(vecs, np.asarray(seqs, dtype=np.int64))
        self._live = set(seqs)
        self._loaded_generation = gen
        self._unsaved = len(seqs)
        log.info("hnsw index rebuilt from %d vectors (%s)", len(seqs), self._path)

    def _new(self, capacity: int) -> Any:
        index = self._hnswlib.Index(space="ip", dim=self._dim)
        index.init_index(max_elements=capacity, ef_construction=200, M=16)
        index.set_ef(128)
        return index

    def _try_load(self, gen: int) -> bool:
        try:
            meta = json.loads(self._meta_path.read_text())
            if meta.get("generation") != gen or meta.get("dim") != self._dim:
                return False
            index = self._hnswlib.Index(space="ip", dim=self._dim)
            index.load_index(str(self._path), max_elements=int(meta["capacity"]))
            index.set_ef(128)
        except (OSError, ValueError, KeyError, RuntimeError):
            return False
        self._index = index
        self._live = set(int(s) for s in meta["live"])
        self._loaded_generation = gen
        self._unsaved = 0
        return True

    def save(self) -> None:
        with self._lock:
            self._save()

    def _save(self) -> None:
        if self._index is None or self._unsaved == 0:
            return
        tmp = self._path.with_suffix(".tmp")
        self._index.save_index(str(tmp))
        os.chmod(tmp, PRIVATE_FILE)  # hnswlib writes it with the umask's mode
        tmp.replace(self._path)
        meta = {
            "generation": self._loaded_generation,
            "dim": self._dim,
            "capacity": int(self._index.get_max_elements()),
            "live": sorted(self._live),
        }
        with open(open_private(self._meta_path, os.O_WRONLY | os.O_TRUNC), "w") as out:
            out.write(json.dumps(meta))
        self._unsaved = 0

    # -- VectorIndex ----------------------------------------------------------------------------

    def add(self, conn: Connection, seqs: Sequence[int], vectors: Vectors) -> None:
        with self._lock:
            self._staged.append(("add", list(seqs), np.asarray(vectors, dtype=np.float32)))

    def remove(self, conn: Connection, seqs: Sequence[int]) -> None:
        with self._lock:
            self._staged.append(("remove", list(seqs), None))

    def commit(self) -> None:
        gen = self._current_generation()
        with self._lock:
            self._commit(gen)

    def _commit(self, gen: int) -> None:
        staged, self._staged = self._staged, []
        for op, seqs, vectors in staged:
            if op == "reset":
                self._index = self._new(1024)
                self._live = set()
                self._unsaved += 1
            elif op == "add" and vectors is not None:
                self._apply_add(seqs, vectors)
            else:
                for s in seqs:
                    if s in self._live:
                        self._index.mark_deleted(s)
                        self._live.discard(s)
            self._unsaved += len(seqs)
        self._loaded_generation = gen
        if self._unsaved >= _SAVE_EVERY:
            self._save()

    def _apply_add(self, seqs: Sequence[int], vectors: Vectors) -> None:
        # Re-adding a label (a re-embedded or restored memory) updates it in place and clears
        # its tombstone; hnswlib does that only when replace_deleted is off, as here.
        needed = self._index.get_current_count() + len(seqs)
        if needed > self._index.get_max_elements():
            self._index.resize_index(max(needed, 2 * self._index.get_max_elements()))
        self._index.add_items(vectors, np.asarray(seqs, dtype=np.int64))
        self._live.update(seqs)

    def rollback(self) -> None:
        with self._lock:
            self._staged = []

    def search(self, conn: Connection, vector: Vectors, k: int) -> list[tuple[int, float]]:
        with self._lock:
            if not self._live:
                return []
            k_eff = min(k, len(self._live))
            self._index.set_ef(max(128, k_eff))
            labels, dists = self._index.knn_query(np.atleast_2d(vector), k=k_eff)
            live = set(self._live)
        pairs = zip(labels[0], dists[0], strict=True)
        scored = {int(s): float(1.0 - d) for s, d in pairs if int(s) in live}
        return top_k(scored, k)

    def reset(self, conn: Connection) -> None:
        """Staged like any change: the new empty graph replaces the old one on commit."""
        with self._lock:
            self._staged = [("reset", [], None)]

    def close(self) -> None:
        try:
            self.save()
        except (OSError, RuntimeError):
            log.warning("could not save the hnsw index %s; it will be rebuilt", self._path)


def _all_vectors(conn: Connection) -> list[Any]:
    return list(conn.execute("SELECT seq, vector FROM memory_vectors ORDER BY seq").fetchall())
