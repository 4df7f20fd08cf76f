"""One search over a store's indexes: gather candidates, score them exactly, rank (no writes)."""

from __future__ import annotations

import dataclasses

from ember.memory.index.base import VectorIndex, Vectors, exact_cosines
from ember.memory.index.fts import FtsIndex, query_terms
from ember.memory.models import MemoryFilter, MemoryHit
from ember.memory.retrieval import lexical
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Candidate, Ranking, rank
from ember.memory.store import rows
from ember.store.driver import Connection

#: Candidates taken from each index: enough that filtering by scope and fusing two lists
#: still leaves ``top_k`` good ones, few enough to stay inside the search latency budget.
MIN_DEPTH = 40


def keywords_only(ranking: Ranking) -> Ranking:
    """The ranking to use while no query vector can be had (the embedder is loading or
    failed): the same absolute scale with the whole say given to keywords, so the floor keeps
    its meaning instead of dropping every hit for lack of a cosine."""
    if ranking.fusion == "norm":
        return dataclasses.replace(ranking, vector_weight=0.0)
    return dataclasses.replace(ranking, fusion="bm25")


def _coverages(
    conn: Connection, fts: FtsIndex, query: MemoryQuery, contents: list[tuple[str, str]]
) -> dict[str, float]:
    """The share of the ask's content terms each candidate holds (``lexical.py``). The ask is
    the user's own words; context (tool outputs, assistant turns) only when they have none."""
    if not contents:
        return {}
    terms = lexical.ask_terms([query.user_text])
    if not terms:
        terms = lexical.ask_terms(query.lexical_texts())
    if not terms:
        return {}
    df = fts.doc_counts(conn, list(terms.values()))
    n = fts.size(conn)
    weights = {stem: lexical.term_weight(df.get(word, 0), n) for stem, word in terms.items()}
    return lexical.coverages(weights, contents)


def run_search(
    conn: Connection,
    query: MemoryQuery,
    qvec: Vectors | None,
    index: VectorIndex | None,
    dim: int | None,
    fts: FtsIndex,
    *,
    top_k: int,
    memory_filter: MemoryFilter | None,
    ranking: Ranking,
    now: float,
) -> list[MemoryHit]:
    fusion = ranking.fusion
    depth = max(MIN_DEPTH, 4 * top_k)
    use_vec = qvec is not None and index is not None and fusion != "bm25"
    vec_hits = (
        dict(index.search(conn, qvec, depth)) if use_vec and index and qvec is not None else {}
    )
    lex_hits: dict[int, float] = {}
    if fusion != "vector" or not use_vec:
        lex_hits = dict(fts.search(conn, query_terms(query.lexical_texts()), depth))
    seqs = sorted(set(vec_hits) | set(lex_hits))
    memories = rows.by_seqs(conn, seqs)
    allowed = memory_filter or MemoryFilter()
    keep = [s for s in seqs if s in memories and memories[s].is_current]
    keep = [s for s in keep if allowed.admits(memories[s])]
    sims = {s: vec_hits[s] for s in keep if s in vec_hits}
    missing = [s for s in keep if s not in sims]
    if qvec is not None and dim is not None and missing:
        sims.update(exact_cosines(conn, qvec, missing, dim))
    cover: dict[str, float] = {}
    if fusion == "norm" and ranking.lexical == "coverage":
        cover = _coverages(conn, fts, query, [(memories[s].id, memories[s].content) for s in keep])
    candidates = [
        Candidate(
            memories[s].id,
            sims.get(s, 0.0),
            lex_hits.get(s),
            memories[s].created_at,
            cover.get(memories[s].id),
        )
        for s in keep
    ]
    by_id = {memories[s].id: memories[s] for s in keep}
    ranked = rank(candidates, now, ranking if use_vec else keywords_only(ranking))
    # A bubbled fact exists twice (where it was learnt and user-wide): show it once, at the
    # better rank, so one fact cannot take two of the ten injection slots.
    seen: set[str] = set()
    hits: list[MemoryHit] = []
    for r in ranked:
        m = by_id[r.key]
        if m.content_hash in seen:
            continue
        seen.add(m.content_hash)
        hits.append(MemoryHit(m, r.score, r.similarity, r.lexical, r.recency))
        if len(hits) >= top_k:
            break
    return hits
