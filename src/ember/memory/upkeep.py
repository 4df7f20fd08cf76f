"""Keeping a memory's row, evidence, FTS entry, vector and user-wide copy in step, inside one
write job.

Every function here runs on the writer's connection inside ``HierarchicalMemory._transact``:
either the row and all its index entries change together or nothing does, so a search can never
find a memory without its text (or a vector without its memory). The store's public methods
decide *what* changes; this module is the one place that knows *which tables* each change
touches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember.memory import bubbling, rows
from ember.memory.drafting import new_id
from ember.memory.errors import MemoryStoreError
from ember.memory.index.base import VectorIndex, Vectors, drop_vectors, get_vectors, put_vectors
from ember.memory.index.fts import FtsIndex
from ember.memory.models import Evidence, Memory, NewMemory
from ember.memory.restating import RESTATE_COSINE, Restatement, restatement
from ember.memory.vindex import IndexSlot
from ember.store.driver import Connection, errors

#: Nearest current memories looked at for a restatement of a new fact.
RESTATE_CANDIDATES = 5


def _scope(m: Memory) -> tuple[str | None, ...]:
    return (m.user_id, m.session_id, m.agent_id, m.turn_id)


def _is_current(conn: Connection, memory_id: str) -> bool:
    found = rows.by_id(conn, memory_id)
    return found is not None and found[1].is_current


@dataclass(frozen=True)
class Upkeep:
    fts: FtsIndex
    vectors: IndexSlot
    bubble_threshold: float
    clock: Callable[[], float]

    def insert_all(
        self,
        conn: Connection,
        index: VectorIndex | None,
        memories: Sequence[Memory],
        vectors: Vectors | None,
        items: Sequence[NewMemory],
        dedup: bool,
    ) -> list[Memory]:
        """Insert each memory, bubbling a copy user-wide when it qualifies, and end the
        memories its item ``supersedes``. With ``dedup``, a fact already current in the same
        scope — word for word, or restated (``restating``) — is not stored twice: the old one
        is returned when it says all the new one says, else the new one replaces it."""
        out: list[Memory] = []
        for i, m in enumerate(memories):
            vec = None if vectors is None else vectors[i : i + 1]
            existing = rows.current_by_hash(conn, m.content_hash, m) if dedup else None
            reworded: Memory | None = None
            if existing is None and dedup:
                near = self.restated(conn, index, m, vec)
                if near is not None and near[1] is Restatement.SAME:
                    existing = near[0]
                elif near is not None:
                    reworded = near[0]
            if existing is not None:
                self.retire(conn, index, items[i].supersedes, existing.id)
                out.append(existing)
                continue
            ended = [*items[i].supersedes, *([reworded.id] if reworded else [])]
            first = next((x for x in ended if _is_current(conn, x)), None)
            if first is not None and m.supersedes is None:
                m = dataclasses.replace(m, supersedes=first)  # its history starts there
            m = self.insert(conn, index, m, vec, items[i].evidence)
            self.retire(conn, index, ended, m.id)
            out.append(m)
            if bubbling.should_bubble(m, self.bubble_threshold):
                self.bubble(conn, index, m, vec)
        return out

    def restated(
        self, conn: Connection, index: VectorIndex | None, m: Memory, vec: Vectors | None
    ) -> tuple[Memory, Restatement] | None:
        """The current memory of ``m``'s scope that ``m`` restates, if any, and how. Needs
        ``m``'s vector (a fact stored without one is only merged word for word)."""
        if vec is None or index is None:
            return None
        for seq, cosine in index.search(conn, vec[0], RESTATE_CANDIDATES):
            if cosine < RESTATE_COSINE:
                break
            old = rows.by_seqs(conn, [seq]).get(seq)
            if old is None or not old.is_current or _scope(old) != _scope(m):
                continue
            kind = restatement(m.content, old.content, cosine)
            if kind is not Restatement.NONE:
                return old, kind
        return None

    def retire(
        self, conn: Connection, index: VectorIndex | None, ids: Sequence[str], successor: str
    ) -> list[str]:
        """End the current memories ``ids`` (and their user-wide copies), each pointing at
        ``successor``; ids of no current memory, and ``successor`` itself, are passed over.
        Returns the ids ended."""
        ended = []
        for memory_id in dict.fromkeys(ids):
            found = rows.by_id(conn, memory_id)
            if found is None or not found[1].is_current or memory_id == successor:
                continue
            self.close(conn, index, found[0], successor)
            for c_seq, _ in rows.current_copies(conn, memory_id):
                self.close(conn, index, c_seq, successor)
            ended.append(memory_id)
        return ended

    def insert(
        self,
        conn: Connection,
        index: VectorIndex | None,
        m: Memory,
        vec: Vectors | None,
        evidence: Sequence[Evidence] = (),
    ) -> Memory:
        """Row + evidence + FTS + vector for one memory."""
        for _ in range(5):
            try:
                seq = rows.insert(conn, m, self.vectors.embedder_key(vec))
                break
            except errors.IntegrityError:
                if rows.by_id(conn, m.id) is None:
                    raise
                m = dataclasses.replace(m, id=new_id())  # a 48-bit id clash: draw again
        else:  # pragma: no cover - five clashes in a row
            raise MemoryStoreError("could not allocate a memory id")
        rows.add_evidence(conn, seq, evidence)
        if m.is_current:
            self.fts.add(conn, [seq], [m.content])
            if vec is not None and index is not None:
                put_vectors(conn, [seq], vec)
                index.add(conn, [seq], vec)
                rows.bump_generation(conn)
        return m

    def bubble(
        self, conn: Connection, index: VectorIndex | None, m: Memory, vec: Vectors | None
    ) -> Memory | None:
        """A user-wide copy of ``m`` (None when the same fact is already user-wide)."""
        copy = bubbling.promoted_copy(m, new_id())
        if rows.current_by_hash(conn, copy.content_hash, copy) is not None:
            return None
        return self.insert(conn, index, copy, vec)

    def reindex_content(
        self,
        conn: Connection,
        index: VectorIndex | None,
        seq: int,
        new: Memory,
        vec: Vectors | None,
    ) -> None:
        """A current memory's content changed in place: its FTS entry and vector follow."""
        self.fts.add(conn, [seq], [new.content])
        self.unindex_vector(conn, index, seq)
        if vec is not None and index is not None:
            put_vectors(conn, [seq], vec)
            index.add(conn, [seq], vec)
        rows.set_fields(conn, seq, embedder=self.vectors.embedder_key(vec))

    def unindex(self, conn: Connection, index: VectorIndex | None, seq: int) -> None:
        self.fts.remove(conn, [seq])
        self.unindex_vector(conn, index, seq)

    def unindex_vector(self, conn: Connection, index: VectorIndex | None, seq: int) -> None:
        drop_vectors(conn, [seq])
        if index is not None:
            index.remove(conn, [seq])
        rows.bump_generation(conn)

    def close(self, conn: Connection, index: VectorIndex | None, seq: int, successor: str) -> None:
        """End a memory's validity (superseded by ``successor``): history, out of the indexes."""
        rows.set_fields(conn, seq, valid_until=self.clock(), superseded_by=successor)
        self.unindex(conn, index, seq)

    def stored_vector(self, conn: Connection, seq: int) -> Vectors | None:
        dim = self.vectors.dim
        if dim is None:
            return None
        got = get_vectors(conn, [seq], dim).get(seq)
        return None if got is None else got.reshape(1, -1)
