"""``HierarchicalMemory``: one project's memories, with their indexes kept in step.

The coordinator stores nothing itself. It owns five parts — the rows, the vector index
(sqlite-vec, or hnswlib; pgvector on a PostgreSQL store), the text index (FTS5; on
PostgreSQL ``PgTextIndex``, which scores as FTS5 does), the embedder and an LRU cache — and its one
job is that they never disagree: ``add``, ``update``, ``supersede`` and ``delete`` change the
row, its vector, its FTS entry and its evidence in ONE transaction (an index outside SQLite
applies its staged change only after the commit), and the cache is updated only after the
commit. A crash or an exception in the middle leaves all of them as they were. What each
write changes is built as a job for that transaction in ``changes.py``.

Methods are blocking (SQLite, the embedder); async code calls them with ``asyncio.to_thread``.
The file belongs to its ``Database`` owner (``ember.store``): every write runs as one
exclusive job on the owner's writer thread — the one writer of the file in this process,
shared with accounting and the ledger — and reads use the owner's read-only connections.
WAL and the busy timeout arbitrate with other processes (the CLI next to a running proxy),
and ``Database.data_version`` tells this object when anyone else wrote.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from ember.memory import bubbling, changes, rows
from ember.memory.deferral import Deferral
from ember.memory.drafting import draft, new_id
from ember.memory.errors import MemoryStoreError, VectorIndexUnavailable, store_errors
from ember.memory.extraction import SavePayload
from ember.memory.finder import Finder
from ember.memory.index.base import VectorIndex, Vectors
from ember.memory.index.cache import LruCache
from ember.memory.index.fts import FtsIndex
from ember.memory.index.pg_text import PgTextIndex
from ember.memory.models import Evidence, Memory, MemoryFilter, MemoryHit, NewMemory
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Fusion, Ranking
from ember.memory.saving import SaveResult
from ember.memory.share import CpuShare
from ember.memory.upkeep import Upkeep
from ember.memory.vectors import EmbedderSlot, EmbedderSource, QueryVectors, cosine_zero, embed
from ember.memory.vindex import IndexSlot
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT

log = logging.getLogger(__name__)

#: How long a store found holding memories is taken to hold them (``is_empty``).
NONEMPTY_SECONDS = 30.0

T = TypeVar("T")
IndexChoice = Literal["auto", "sqlite-vec", "hnsw"]


class HierarchicalMemory:
    def __init__(
        self,
        db: Database | Path,
        embedder: EmbedderSource | None,
        *,
        vector_index: IndexChoice = "auto",
        cache_size: int = 1024,
        bubble_threshold: float = bubbling.BUBBLE_THRESHOLD,
        ranking: Ranking | None = None,
        clock: Callable[[], float] = time.time,
        time_aware: bool = True,
        cpu_share: CpuShare | None = None,
    ) -> None:
        """``db`` is the file's owner (the proxy's ``Storage`` hands it out), or a path for a
        store of its own (the CLI, tests), closed with this object. Blocking: opens the file.
        ``time_aware=False``: an ask naming a time ranks as one naming none. ``cpu_share``:
        the process's budget for memory work no answer waits for (``add_many(background=)``)."""
        self._owns_db = not isinstance(db, Database)
        if isinstance(db, Database):
            self._db = db
        else:
            self._db = Database(Path(db), PROJECT, vec=vector_index != "hnsw", log_failures=False)
        self._lock = threading.RLock()  # in-memory state only (cache, index slot)
        self._closed = False
        try:
            self._data_version = self._db.data_version()
        except store_errors() as exc:
            self._close_db()
            raise MemoryStoreError(f"cannot open memory database {self.where}: {exc}") from exc
        postgres = self._db.dialect == "postgres"
        use_vec = False if postgres else self._check_vec(vector_index)
        self._fts = PgTextIndex() if postgres else FtsIndex()
        self._cache = LruCache(cache_size)
        self._ranking, self._time_aware = ranking, time_aware
        self._clock = clock
        self._nonempty_at = -NONEMPTY_SECONDS  # when a look last found memories (monotonic)
        self._embedder = EmbedderSlot(embedder)
        self._vectors = IndexSlot(self._db, use_vec, self._transact, self._embedder, self._lock)
        self._deferral = Deferral(
            cpu_share, self._embed, lambda limit: self._vectors.backfill(limit, limit=limit)
        )
        self._upkeep = Upkeep(self._fts, self._vectors, bubble_threshold, clock)
        self._finder = Finder(self._snapshot_read, self._fts, self._embedder, self._vectors)

    def _check_vec(self, choice: IndexChoice) -> bool:
        """Whether sqlite-vec is the index. ``sqlite-vec`` fails when the extension cannot
        load, rather than quietly running another index the user did not choose; ``auto``
        falls back to hnsw with a warning; ``hnsw`` never uses the extension."""
        if choice == "hnsw":
            return False
        problem = self._db.vec_problem or (None if self._db.vec else "not loaded by its owner")
        if problem and choice == "sqlite-vec":
            self._close_db()
            raise VectorIndexUnavailable(
                f"memory_vector_index is 'sqlite-vec' but the extension cannot load ({problem}); "
                "install sqlite-vec and sqlean.py, or set EMBER_MEMORY_VECTOR_INDEX=auto"
            )
        if problem:
            log.warning("sqlite-vec unavailable (%s); hnswlib index for %s", problem, self.where)
        return problem is None

    def _close_db(self) -> None:
        if self._owns_db:
            self._db.close()

    # -- properties -------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def where(self) -> str:
        """The store as messages name it: its file, or its schema and server on PostgreSQL
        (where ``path`` names a file that does not exist)."""
        return self._db.where

    @property
    def embedder_error(self) -> Exception | None:
        """Why the embedder could not be had on the last try (None when it is fine)."""
        return self._embedder.error

    @property
    def embedder_ready(self) -> bool:
        """Whether the embedder answers now (its source is asked again if it had not)."""
        return self._embedder.get() is not None

    @property
    def query_vectors(self) -> QueryVectors:
        """The query vectors this store computed and reused (``bench/storage_soak.py``)."""
        return self._finder.queries

    @property
    def index_name(self) -> str | None:
        """ "sqlite-vec", "hnsw", "pgvector", or None while no embedder is available."""
        return self._vectors.index_name

    # -- transactions -----------------------------------------------------------------------------

    def _check_external(self) -> None:
        """Someone else committed since our last look: drop what we cached."""
        v = self._db.data_version()
        with self._lock:
            if v == self._data_version:
                return
            self._data_version = v
            self._cache.clear()
        self._vectors.external_change()

    def _transact(
        self,
        fn: Callable[[Connection, VectorIndex | None], T],
        *,
        embed: bool = True,
        retried: bool = False,
    ) -> T:
        """One write transaction over rows, vectors, FTS and evidence, run on the owner's
        writer thread; ``fn`` gets the writer's connection and the vector index
        (``embed=False``: a removal that must not wait for the model to load). An index kept
        outside SQLite applies its staged change only after the commit. ``retried``: a
        refusal loses nothing (the caller does it again later), so it is not counted as a
        dropped write."""
        if self._closed:
            raise MemoryStoreError(f"memory store {self.path} is closed")
        try:
            index = self._vectors.index(embed=embed)
            self._check_external()
            return self._db.write(
                lambda conn: fn(conn, index),
                exclusive=True,
                on_commit=index.commit if index is not None else None,
                on_rollback=index.rollback if index is not None else None,
                label="memory",
                retried=retried,
            )
        except store_errors() as exc:
            raise MemoryStoreError(f"memory write failed in {self.path}: {exc}") from exc

    def _query(self, fn: Callable[[Connection], T]) -> T:
        """A read on one of the owner's read-only connections (one consistent snapshot)."""
        if self._closed:
            raise MemoryStoreError(f"memory store {self.path} is closed")
        try:
            self._check_external()
            return self._db.read(fn)
        except store_errors() as exc:
            raise MemoryStoreError(f"memory read failed in {self.path}: {exc}") from exc

    def _snapshot_read(self, fn: Callable[[Connection], T]) -> T:
        """``_query`` without its look for other writers: a search looks once, at its start,
        for all of its reads (each look is a ``PRAGMA data_version``; three per search were
        4% of a loaded proxy's samples)."""
        if self._closed:
            raise MemoryStoreError(f"memory store {self.path} is closed")
        try:
            return self._db.read(fn)
        except store_errors() as exc:
            raise MemoryStoreError(f"memory read failed in {self.path}: {exc}") from exc

    # -- writes ------------------------------------------------------------------------------------

    def add(self, content: str, **fields: Any) -> Memory:
        """Store one fact (see ``NewMemory`` for the fields); returns it, or the identical
        current fact already stored in the same scope (dedup by content hash)."""
        dedup = bool(fields.pop("dedup", True))
        return self.add_many([NewMemory(content, **fields)], dedup=dedup)[0]

    def add_many(
        self, items: Sequence[NewMemory], *, dedup: bool = True, background: bool = False
    ) -> list[Memory]:
        """Store many facts in one transaction (embedding them in one batch first).

        ``background``: nobody waits for these (a shadow's or traffic learning's facts).
        While memory's CPU share is spent they are stored without vectors, found by their
        words at once and by their meaning once ``catch_up`` embeds them (``deferral.py``)."""
        memories = [self._materialise(item) for item in items]
        texts = [m.content for m in memories]
        vectors = self._deferral.embed(texts) if background else self._embed(texts)
        out = self._transact(changes.add_job(self._upkeep, memories, vectors, items, dedup))
        self._cache_put(out)
        return out

    def _materialise(self, item: NewMemory) -> Memory:
        return draft(item, new_id(), self._clock())

    def _require(self, conn: Connection, memory_id: str) -> tuple[int, Memory]:
        return changes.require(conn, memory_id, self.path)

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
        _, old = self._query(lambda conn: self._require(conn, memory_id))
        edits = changes.edits(
            old,
            self._materialise,
            content=content,
            importance=importance,
            category=category,
            metadata=metadata,
        )
        vec = self._embed([edits["content"]]) if "content" in edits else None
        new = self._transact(changes.update_job(self._upkeep, self.path, memory_id, edits, vec))
        self._cache_put([new])
        return new

    def supersede(self, memory_id: str, content: str, **fields: Any) -> Memory:
        """Replace a fact that changed: a new current memory, the old one kept as history.

        The old row gets ``valid_until`` and ``superseded_by`` and leaves the indexes; the new
        one inherits the old scope, category, importance and metadata unless given. A
        user-wide copy promoted from the old fact is closed too, so the outdated version cannot
        live on at the user scope.
        """
        _, old = self._query(lambda conn: self._require(conn, memory_id))
        successor = changes.successor(old, content, fields, self._materialise)
        vec = self._embed([successor.content])
        new = self._transact(
            changes.supersede_job(self._upkeep, self.path, memory_id, successor, vec)
        )
        self._cache_discard([old.id])
        self._cache_put([new])
        return new

    def delete(self, memory_id: str) -> list[str]:
        """Delete a memory for good, with its vector, evidence and any user-wide copies
        promoted from it (the same fact); returns the ids deleted (empty if none existed)."""
        deleted = self._transact(changes.delete_job(self._upkeep, memory_id), embed=False)
        self._cache_discard(deleted)
        return deleted

    # -- the cache (updated only after a commit) -------------------------------------------------

    def _cache_put(self, memories: Sequence[Memory]) -> None:
        with self._lock:
            self._cache.put(memories)

    def _cache_discard(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._cache.discard(ids)

    # -- reads -------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        self._check_external()
        with self._lock:
            cached = self._cache.get(memory_id)
        if cached is not None:
            return cached
        found = self._query(lambda conn: rows.by_id(conn, memory_id))
        if found is None:
            return None
        self._cache_put([found[1]])
        return found[1]

    def list(
        self,
        *,
        include_history: bool = False,
        memory_filter: MemoryFilter | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """Memories newest first; superseded ones only with ``include_history``."""
        return self._query(
            lambda conn: rows.listing(
                conn,
                include_history=include_history,
                memory_filter=memory_filter,
                limit=limit,
                offset=offset,
            )
        )

    def count(self) -> int:
        """Current memories."""
        return self._query(rows.count_current)

    def is_empty(self) -> bool:
        """No current memory: one index seek, where ``count`` reads every current row (8% of
        a loaded proxy's samples when each new ask counted a store of 1,000). A store found
        holding memories is taken to hold them for ``NONEMPTY_SECONDS`` without looking again
        (still 5% under 8 agents): if all of them are forgotten meanwhile, an ask embeds its
        query for a search that finds nothing — never the other way round."""
        if self.known_nonempty():
            return False
        now = time.monotonic()
        empty = not self._snapshot_read(rows.any_current)  # no cache to check: a plain read
        if not empty:
            self._nonempty_at = now
        return empty

    def known_nonempty(self) -> bool:
        """Whether a look of the last ``NONEMPTY_SECONDS`` found memories: no I/O, so the
        request path can skip the worker-thread hop ``is_empty`` would cost (~0.1 ms)."""
        return time.monotonic() - self._nonempty_at < NONEMPTY_SECONDS

    def current(self, ids: Sequence[str]) -> builtins.list[Memory]:
        """The current version of each memory named — a superseded one's successor — once
        each, in order; ids that lead to nothing current are passed over."""

        def read(conn: Connection) -> builtins.list[Memory]:
            found = (rows.current_version(conn, i) for i in ids)
            return builtins.list({m.id: m for m in found if m is not None}.values())

        return self._query(read)

    def recalled(self, session_id: str) -> builtins.list[Memory]:
        """The current versions of the memories injected into the session's asks: what the
        session was told it remembers (the shadow turn shows them, so a correction can name
        what it corrects)."""
        return self.current(self._query(lambda conn: rows.injected_ids(conn, session_id)))

    def evidence(self, memory_id: str) -> builtins.list[Evidence]:
        def read(conn: Connection) -> builtins.list[Evidence]:
            seq, _ = self._require(conn, memory_id)
            return rows.evidence_of(conn, seq)

        return self._query(read)

    def history(self, memory_id: str) -> builtins.list[Memory]:
        """The supersession chain through ``memory_id``, oldest first."""

        def read(conn: Connection) -> builtins.list[Memory]:
            self._require(conn, memory_id)
            return rows.chain(conn, memory_id)

        return self._query(read)

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
        items = changes.save_items(payload, evidence, scope)
        memories = [self._materialise(i) for i in items]
        vectors = self._embed([m.content for m in memories])
        job = changes.save_job(self._upkeep, payload, memories, vectors, items, self._clock)
        saved, entities = self._transact(job)
        self._cache_put(saved)
        return SaveResult(tuple(saved), tuple(entities), len(payload.relationships))

    def search(
        self,
        query: MemoryQuery | str,
        *,
        top_k: int = 10,
        memory_filter: MemoryFilter | None = None,
        fusion: Fusion | Ranking | None = None,
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
        now = self._clock() if now is None else now
        try:
            self._check_external()  # once, for every read of this search
        except store_errors() as exc:
            raise MemoryStoreError(f"memory read failed in {self.path}: {exc}") from exc
        hits = self._finder.find(
            q,
            top_k=top_k,
            memory_filter=memory_filter,
            ranking=self._ranking_for(fusion),
            now=now,
        )
        if touch and hits:
            self._touch(hits)
        return hits

    def _ranking_for(self, fusion: Fusion | Ranking | None) -> Ranking:
        """The ranking asked for, else this store's, else the default for its embedder."""
        if isinstance(fusion, Ranking):
            return fusion
        base = self._ranking or Ranking(cosine_zero=cosine_zero(self._embedder.get()))
        base = base if self._time_aware else dataclasses.replace(base, time_weight=0.0)
        return base if fusion is None else dataclasses.replace(base, fusion=fusion)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far (access counts of searches) is committed."""
        return self._db.flush(timeout)

    def _touch(self, hits: Sequence[MemoryHit]) -> None:
        ids = [h.memory.id for h in hits]
        job = changes.touch_job(ids, self._clock())
        # Access counts touch no index, and no answer waits for them: queued with whatever
        # else the writer has (a search that waited for its own commit doubled the writer's
        # commits and held a thread per ask until the disk had it).
        # The cached rows are dropped now, not on the writer's commit: a hook there would take
        # this store's lock on the writer thread, which a write of this store can be waiting
        # for under the same lock. A read in between may cache a row one access behind.
        self._cache_discard(ids)
        try:
            self._db.submit(job, label="memory-touch")
        except store_errors() as exc:
            raise MemoryStoreError(f"memory write failed in {self.path}: {exc}") from exc

    # -- embedding -----------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> Vectors | None:
        embedder = self._embedder.get()
        return None if embedder is None else embed(embedder, texts)

    @property
    def deferred(self) -> bool:
        """Whether facts stored while the share was spent still wait for their vectors."""
        return self._deferral.pending

    def catch_up(self, limit: int = 32) -> int:
        """Embed up to ``limit`` of the facts stored without vectors, if memory's CPU share
        allows now (``deferral.py``); returns how many. A store opened afresh embeds them all
        when first searched."""
        return self._deferral.catch_up(limit)

    def backfill(self, batch: int = 256, progress: Callable[[int], None] | None = None) -> int:
        """Embed current memories stored without a vector (the embedder was not ready, or
        changed); returns how many were filled."""
        return self._vectors.backfill(batch, progress)

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def database(self) -> Database:
        return self._db

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._vectors.close()
        finally:
            self._close_db()

    def __enter__(self) -> HierarchicalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
