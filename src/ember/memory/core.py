"""``HierarchicalMemory``: one project's memories, with their indexes kept in step.

The coordinator stores nothing itself. It owns five parts — the SQLite rows, the vector index
(sqlite-vec, or hnswlib), the FTS5 text index, the embedder and an LRU cache — and its one
job is that they never disagree: ``add``, ``update``, ``supersede`` and ``delete`` change the
row, its vector, its FTS entry and its evidence in ONE transaction (an index outside SQLite
applies its staged change only after the commit), and the cache is updated only after the
commit. A crash or an exception in the middle leaves all of them as they were.

Methods are blocking (SQLite, the embedder); async code calls them with ``asyncio.to_thread``.
One ``RLock`` makes this object the single writer of its file within a process; WAL and the
busy timeout arbitrate with other processes (the CLI next to a running proxy), and
``PRAGMA data_version`` tells this object when another process wrote.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ember.memory import bubbling
from ember.memory.drafting import clean_id, draft, new_id
from ember.memory.errors import MemoryInputError, MemoryNotFound, MemoryStoreError
from ember.memory.extraction import SavePayload
from ember.memory.index.base import (
    VectorIndex,
    Vectors,
    drop_vectors,
    get_vectors,
    put_vectors,
)
from ember.memory.index.cache import LruCache
from ember.memory.index.fts import FtsIndex
from ember.memory.models import Evidence, Memory, MemoryFilter, MemoryHit, NewMemory, content_hash
from ember.memory.retrieval.query import EMBED_WINDOW_CHARS, MemoryQuery
from ember.memory.retrieval.rank import Fusion
from ember.memory.saving import SaveResult, store_graph
from ember.memory.search import run_search
from ember.memory.store import rows
from ember.memory.store.connect import IndexChoice, db_errors, open_memory_db
from ember.memory.vectors import EmbedderSlot, EmbedderSource, embed
from ember.memory.vindex import IndexSlot

log = logging.getLogger(__name__)


class HierarchicalMemory:
    def __init__(
        self,
        path: Path,
        embedder: EmbedderSource | None,
        *,
        vector_index: IndexChoice = "auto",
        cache_size: int = 1024,
        bubble_threshold: float = bubbling.BUBBLE_THRESHOLD,
        fusion: Fusion = "mix",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = open_memory_db(path, vector_index)
        self._conn = self._db.conn
        self._errors = db_errors()
        self._lock = threading.RLock()
        self._fts = FtsIndex(self._conn)
        self._cache = LruCache(cache_size)
        self._bubble_threshold = bubble_threshold
        self._fusion: Fusion = fusion
        self._clock = clock
        self._embedder = EmbedderSlot(embedder)
        self._vectors = IndexSlot(self._db, self._write, self._embedder)
        self._data_version = self._version()
        self._closed = False

    # -- properties -------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def embedder_error(self) -> Exception | None:
        """Why the embedder could not be had on the last try (None when it is fine)."""
        return self._embedder.error

    @property
    def embedder_ready(self) -> bool:
        """Whether the embedder answers now (its source is asked again if it had not)."""
        return self._embedder.get() is not None

    @property
    def index_name(self) -> str | None:
        """ "sqlite-vec", "hnsw", or None while no embedder is available."""
        return self._vectors.index_name

    # -- transactions -----------------------------------------------------------------------------

    def _version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _check_external(self) -> None:
        """Another connection committed since our last look: drop what we cached."""
        v = self._version()
        if v != self._data_version:
            self._data_version = v
            self._cache.clear()
            self._vectors.external_change()

    @contextmanager
    def _write(self, embed: bool = True) -> Iterator[VectorIndex | None]:
        """One write transaction over rows, vectors, FTS and evidence; yields the vector index
        (``embed=False``: a removal that must not wait for the model to load)."""
        with self._lock:
            if self._closed:
                raise MemoryStoreError(f"memory store {self.path} is closed")
            index = self._vectors.index(embed=embed)
            try:
                self._check_external()
                self._conn.execute("BEGIN IMMEDIATE")
            except self._errors as exc:
                raise MemoryStoreError(f"cannot write {self.path}: {exc}") from exc
            try:
                yield index
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._conn.execute("ROLLBACK")
                if index is not None:
                    index.rollback()
                if isinstance(exc, self._errors):
                    raise MemoryStoreError(f"memory write failed in {self.path}: {exc}") from exc
                raise
            if index is not None:
                index.commit()

    @contextmanager
    def _read(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise MemoryStoreError(f"memory store {self.path} is closed")
            try:
                self._check_external()
                yield
            except self._errors as exc:
                raise MemoryStoreError(f"memory read failed in {self.path}: {exc}") from exc

    # -- writes ------------------------------------------------------------------------------------

    def add(self, content: str, **fields: Any) -> Memory:
        """Store one fact (see ``NewMemory`` for the fields); returns it, or the identical
        current fact already stored in the same scope (dedup by content hash)."""
        dedup = bool(fields.pop("dedup", True))
        return self.add_many([NewMemory(content, **fields)], dedup=dedup)[0]

    def add_many(self, items: Sequence[NewMemory], *, dedup: bool = True) -> list[Memory]:
        """Store many facts in one transaction (embedding them in one batch first)."""
        memories = [self._materialise(item) for item in items]
        vectors = self._embed([m.content for m in memories])
        with self._write() as index:
            out = self._insert_all(index, memories, vectors, items, dedup)
        self._cache.put(out)
        return out

    def _materialise(self, item: NewMemory) -> Memory:
        return draft(item, new_id(), self._clock())

    def _insert_all(
        self,
        index: VectorIndex | None,
        memories: Sequence[Memory],
        vectors: Vectors | None,
        items: Sequence[NewMemory],
        dedup: bool,
    ) -> list[Memory]:
        out: list[Memory] = []
        for i, m in enumerate(memories):
            existing = rows.current_by_hash(self._conn, m.content_hash, m) if dedup else None
            if existing is not None:
                out.append(existing)
                continue
            vec = None if vectors is None else vectors[i : i + 1]
            m = self._insert(index, m, vec, items[i].evidence)
            out.append(m)
            if bubbling.should_bubble(m, self._bubble_threshold):
                self._bubble(index, m, vec)
        return out

    def _insert(
        self,
        index: VectorIndex | None,
        m: Memory,
        vec: Vectors | None,
        evidence: Sequence[Evidence] = (),
    ) -> Memory:
        """Row + evidence + FTS + vector for one memory (inside ``_write``)."""
        driver_integrity = tuple(getattr(e, "IntegrityError", e) for e in self._errors)
        for _ in range(5):
            try:
                seq = rows.insert(self._conn, m, self._vectors.embedder_key(vec))
                break
            except driver_integrity:
                if rows.by_id(self._conn, m.id) is None:
                    raise
                m = dataclasses.replace(m, id=new_id())  # a 48-bit id clash: draw again
        else:  # pragma: no cover - five clashes in a row
            raise MemoryStoreError("could not allocate a memory id")
        rows.add_evidence(self._conn, seq, evidence)
        if m.is_current:
            self._fts.add([seq], [m.content])
            if vec is not None and index is not None:
                put_vectors(self._conn, [seq], vec)
                index.add([seq], vec)
                rows.bump_generation(self._conn)
        return m

    def _bubble(self, index: VectorIndex | None, m: Memory, vec: Vectors | None) -> Memory | None:
        copy = bubbling.promoted_copy(m, new_id())
        if rows.current_by_hash(self._conn, copy.content_hash, copy) is not None:
            return None  # the same fact is already user-wide
        return self._insert(index, copy, vec)

    def _unindex(self, index: VectorIndex | None, seq: int) -> None:
        self._fts.remove([seq])
        drop_vectors(self._conn, [seq])
        if index is not None:
            index.remove([seq])
        rows.bump_generation(self._conn)

    def _require(self, memory_id: str) -> tuple[int, Memory]:
        found = rows.by_id(self._conn, memory_id)
        if found is None:
            raise MemoryNotFound(f"no memory with id {memory_id!r} in {self.path}")
        return found

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        category: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Correct a memory in place (no history kept: use ``supersede`` when a fact changed)."""
        with self._read():
            _, old = self._require(memory_id)
        changes: dict[str, Any] = {}
        if content is not None and content.strip() != old.content:
            changes["content"] = self._materialise(NewMemory(content)).content
            changes["content_hash"] = content_hash(changes["content"])
        if importance is not None:
            self._materialise(NewMemory(old.content, importance=importance))
            changes["importance"] = float(importance)
        if category is not None:
            changes["category"] = clean_id(category)
        if metadata is not None:
            changes["metadata"] = dict(metadata)
        vec = self._embed([changes["content"]]) if "content" in changes else None
        with self._write() as index:
            seq, old = self._require(memory_id)
            if changes:
                rows.set_fields(self._conn, seq, **changes)
            new = dataclasses.replace(old, **changes)
            if "content" in changes and new.is_current:
                self._fts.add([seq], [new.content])
                self._unindex_vector_only(index, seq)
                if vec is not None and index is not None:
                    put_vectors(self._conn, [seq], vec)
                    index.add([seq], vec)
                rows.set_fields(self._conn, seq, embedder=self._vectors.embedder_key(vec))
            if bubbling.should_bubble(new, self._bubble_threshold) and not rows.has_copy(
                self._conn, new.id
            ):
                self._bubble(index, new, self._stored_vector(seq))
        self._cache.put([new])
        return new

    def _unindex_vector_only(self, index: VectorIndex | None, seq: int) -> None:
        drop_vectors(self._conn, [seq])
        if index is not None:
            index.remove([seq])
        rows.bump_generation(self._conn)

    def _stored_vector(self, seq: int) -> Vectors | None:
        dim = self._vectors.dim
        if dim is None:
            return None
        got = get_vectors(self._conn, [seq], dim).get(seq)
        return None if got is None else got.reshape(1, -1)

    def supersede(self, memory_id: str, content: str, **fields: Any) -> Memory:
        """Replace a fact that changed: a new current memory, the old one kept as history.

        The old row gets ``valid_until`` and ``superseded_by`` and leaves the indexes; the new
        one inherits the old scope, category, importance and metadata unless given. A
        user-wide copy promoted from the old fact is closed too, so the outdated version cannot
        live on at the user scope.
        """
        with self._read():
            _, old = self._require(memory_id)
        if not old.is_current:
            raise MemoryInputError(
                f"memory {memory_id} was already superseded by {old.superseded_by}; "
                "supersede the current version instead"
            )
        inherit = {
            k: getattr(old, k)
            for k in ("user_id", "session_id", "agent_id", "turn_id", "category", "importance")
        }
        inherit["metadata"] = old.metadata
        draft = self._materialise(NewMemory(content, **{**inherit, **fields}))
        draft = dataclasses.replace(draft, supersedes=old.id)
        vec = self._embed([draft.content])
        with self._write() as index:
            seq, old = self._require(memory_id)
            new = self._insert(index, draft, vec)
            copy = None
            if bubbling.should_bubble(new, self._bubble_threshold):
                copy = self._bubble(index, new, vec)
            self._close(index, seq, new.id)
            for c_seq, _ in rows.current_copies(self._conn, old.id):
                self._close(index, c_seq, copy.id if copy else new.id)
        self._cache.discard([old.id])
        self._cache.put([new])
        return new

    def _close(self, index: VectorIndex | None, seq: int, successor: str) -> None:
        now = self._clock()
        rows.set_fields(self._conn, seq, valid_until=now, superseded_by=successor)
        self._unindex(index, seq)

    def delete(self, memory_id: str) -> list[str]:
        """Delete a memory for good, with its vector, evidence and any user-wide copies
        promoted from it (the same fact); returns the ids deleted (empty if none existed)."""
        with self._write(embed=False) as index:
            found = rows.by_id(self._conn, memory_id)
            if found is None:
                return []
            targets = [found, *rows.current_copies(self._conn, memory_id)]
            for seq, _ in targets:
                self._unindex(index, seq)
                rows.delete(self._conn, seq)
        deleted = [m.id for _, m in targets]
        self._cache.discard(deleted)
        return deleted

    # -- reads -------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        with self._read():
            cached = self._cache.get(memory_id)
            if cached is not None:
                return cached
            found = rows.by_id(self._conn, memory_id)
            if found is None:
                return None
            self._cache.put([found[1]])
            return found[1]

    def list(
        self,
        *,
        include_history: bool = False,
        memory_filter: MemoryFilter | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Memory]:
        """Memories newest first; superseded ones only with ``include_history``."""
        with self._read():
            return rows.listing(
                self._conn,
                include_history=include_history,
                memory_filter=memory_filter,
                limit=limit,
                offset=offset,
            )

    def count(self) -> int:
        """Current memories."""
        with self._read():
            return rows.count_current(self._conn)

    def evidence(self, memory_id: str) -> builtins.list[Evidence]:
        with self._read():
            seq, _ = self._require(memory_id)
            return rows.evidence_of(self._conn, seq)

    def history(self, memory_id: str) -> builtins.list[Memory]:
        """The supersession chain through ``memory_id``, oldest first."""
        with self._read():
            self._require(memory_id)
            return rows.chain(self._conn, memory_id)

    def save(
        self,
        payload: SavePayload,
        *,
        evidence: Sequence[Evidence] = (),
        **scope: str | None,
    ) -> SaveResult:
        """Execute one ``memory_save`` call: its facts (deduplicated, bubbled like ``add``),
        entities and relationships, in one transaction. ``scope`` takes ``user_id``,
        ``session_id``, ``agent_id``, ``turn_id``; ``evidence`` is attached to every fact."""
        items = [
            NewMemory(
                f.content,
                importance=f.importance,
                category=f.category,
                evidence=tuple(evidence),
                **scope,  # type: ignore[arg-type]
            )
            for f in payload.facts
        ]
        memories = [self._materialise(i) for i in items]
        vectors = self._embed([m.content for m in memories])
        with self._write() as index:
            saved = self._insert_all(index, memories, vectors, items, True)
            entities = store_graph(self._conn, payload, saved, self._clock())
        self._cache.put(saved)
        return SaveResult(tuple(saved), tuple(entities), len(payload.relationships))

    def search(
        self,
        query: MemoryQuery | str,
        *,
        top_k: int = 10,
        memory_filter: MemoryFilter | None = None,
        fusion: Fusion | None = None,
        now: float | None = None,
        touch: bool = True,
    ) -> builtins.list[MemoryHit]:
        """The ``top_k`` current memories for ``query``, best first (ties by id).

        Hybrid by default: vector and BM25 candidates, fused (``retrieval.rank``), boosted by
        recency. No similarity floor here — that belongs to the injection budget. ``touch``
        counts the hits as accessed (the export writers rank by access).
        """
        q = MemoryQuery(query) if isinstance(query, str) else query
        if q.is_empty or top_k <= 0:
            return []
        mode = fusion or self._fusion
        embedder = self._embedder.get() if mode != "bm25" else None
        text = q.to_embedding_input(EMBED_WINDOW_CHARS)
        qvec = embed(embedder, [text]) if embedder is not None else None
        with self._read():
            hits = run_search(
                self._conn,
                q,
                qvec[0] if qvec is not None else None,
                self._vectors.index(),
                self._vectors.dim,
                self._fts,
                top_k=top_k,
                memory_filter=memory_filter,
                fusion=mode,
                now=self._clock() if now is None else now,
            )
        if touch and hits:
            self._touch(hits)
        return hits

    def _touch(self, hits: Sequence[MemoryHit]) -> None:
        ids = [h.memory.id for h in hits]
        with self._write(embed=False):
            marks = ",".join("?" * len(ids))
            seqs = [
                int(r[0])
                for r in self._conn.execute(f"SELECT seq FROM memories WHERE id IN ({marks})", ids)
            ]
            rows.touch(self._conn, seqs, self._clock())
        self._cache.discard(ids)

    # -- embedding -----------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> Vectors | None:
        embedder = self._embedder.get()
        return None if embedder is None else embed(embedder, texts)

    def backfill(self, batch: int = 256, progress: Callable[[int], None] | None = None) -> int:
        """Embed current memories stored without a vector (the embedder was not ready, or
        changed); returns how many were filled."""
        return self._vectors.backfill(batch, progress)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._vectors.close()
            finally:
                self._conn.close()

    def __enter__(self) -> HierarchicalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
