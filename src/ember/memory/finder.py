"""A store's search pipeline: the query vector, the two candidate sides at once, the merge.

The stages themselves are pure functions of a snapshot (``search.py``); this module decides
which run, and in what order, for a ranking: ``bm25`` never embeds, ``vector`` asks FTS5 for
candidates only when no vector can be had, and a fused ranking overlaps its keyword side with
the embedding and the vector side (``overlap.both``). A search with no vector (the embedder is
loading or failed) is a keyword search alone, whose candidates include memories holding only
the ask's common words: no vector side is there to find them. An ask naming a time adds the
candidates inside that window (``search.window_side``) when the ranking weighs time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from ember.memory import overlap
from ember.memory import search as stages
from ember.memory.index.base import Vectors
from ember.memory.index.fts import FtsIndex
from ember.memory.models import MemoryFilter, MemoryHit
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Ranking
from ember.memory.retrieval.timeframe import Window, ask_window
from ember.memory.vectors import EmbedderSlot, QueryVectors, embed_query
from ember.memory.vindex import IndexSlot
from ember.store.driver import Connection

log = logging.getLogger(__name__)

T = TypeVar("T")

_KEYWORDS_ONLY = "memory search by keywords only: no query vector (embedder not ready)"


class Reader(Protocol):
    """Runs a read on one of the store's read-only connections, in one snapshot."""

    def __call__(self, fn: Callable[[Connection], T]) -> T: ...


@dataclass(frozen=True)
class Finder:
    read: Reader
    fts: FtsIndex
    embedder: EmbedderSlot
    vectors: IndexSlot
    queries: QueryVectors = field(default_factory=QueryVectors)

    def find(
        self,
        q: MemoryQuery,
        *,
        top_k: int,
        memory_filter: MemoryFilter | None,
        ranking: Ranking,
        now: float,
    ) -> list[MemoryHit]:
        """The ``top_k`` best hits for ``q`` under ``ranking``, best first."""
        index, dim = self.vectors.index(), self.vectors.dim
        depth = stages.depth_for(top_k)

        def vector_part() -> tuple[Vectors | None, dict[int, float]]:
            qvec = self.query_vector(q) if ranking.fusion != "bm25" else None
            return qvec, self.read(lambda c: stages.vector_side(c, index, qvec, depth))

        def keyword_part(candidates: bool, alone: bool) -> stages.KeywordSide:
            return self.read(
                lambda c: stages.keyword_side(
                    c, self.fts, q, depth=depth, ranking=ranking, candidates=candidates, alone=alone
                )
            )

        qvec: Vectors | None = None
        vec_hits: dict[int, float] | None = {}
        if ranking.fusion == "bm25":
            keywords = keyword_part(True, False)
        elif index is None or self.embedder.get() is None:
            log.info(_KEYWORDS_ONLY)
            keywords = keyword_part(True, True)
        elif ranking.fusion == "vector":  # keyword candidates only when there is no vector
            qvec, vec_hits = vector_part()
            keywords = keyword_part(qvec is None, qvec is None)
        else:
            # The keyword side overlaps the embedding; the vector side then runs in the merge's
            # own snapshot (one read transaction fewer per search).
            keywords, qvec = overlap.both(
                lambda: keyword_part(True, False), lambda: self.query_vector(q)
            )
            vec_hits = None
            if qvec is None:  # the embedding failed: the keywords are all there is after all
                keywords = keyword_part(True, True)
        window = self.window(q, ranking, now)

        def merged(conn: Connection) -> list[MemoryHit]:
            hits = stages.vector_side(conn, index, qvec, depth) if vec_hits is None else vec_hits
            more: list[int] = []
            if window is not None:
                more = stages.window_side(conn, self.fts, q, window, qvec, dim, depth)
            return stages.merge(
                conn,
                qvec,
                dim,
                hits,
                keywords,
                vectors=stages.uses_vectors(ranking, qvec, index),
                top_k=top_k,
                memory_filter=memory_filter,
                ranking=ranking,
                now=now,
                window=window,
                more=more,
            )

        return self.read(merged)

    def window(self, q: MemoryQuery, ranking: Ranking, now: float) -> Window | None:
        """The time the user's own words name, when the ranking weighs time (never context:
        a date in a pasted log says nothing about what the user asks for); days are the
        machine's own."""
        if ranking.time_weight <= 0:
            return None
        return ask_window(q.user_text, now)

    def query_vector(self, q: MemoryQuery) -> Vectors | None:
        """The ask's vector, or None while the embedder is loading or failed (then the search
        ranks by keywords alone, and says so in the log)."""
        embedder = self.embedder.get()
        text = q.vector_input()
        if embedder is not None and (known := self.queries.get(embedder.name, text)) is not None:
            return known
        qvec = embed_query(embedder, [text]) if embedder is not None else None
        if qvec is None or embedder is None:
            log.info(_KEYWORDS_ONLY)
            return None
        row: Vectors = qvec[0]
        self.queries.put(embedder.name, text, row)
        return row
