"""One search over a store's indexes, in three read-only stages (no writes).

1. ``keyword_side``: BM25 candidates from FTS5 and the weights of the ask's content terms;
2. ``vector_side``: nearest neighbours of the query vector;
3. ``merge``: load the candidates, score each exactly (cosine, keyword share), rank.

An ask that names a time (``timeframe.ask_window``) also takes candidates from inside that
window (``window_side``) before the merge.

The first two need nothing from each other, so the store runs them at the same time
(``finder.Finder.find``): at 100k memories each takes ~25-35 ms on this project's bench
machine, and one after the other they alone broke the 60 ms budget. Each stage is a pure
function of its snapshot and inputs: run together or one after the other, a search gives the
same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ember.memory import rows
from ember.memory.index.base import VectorIndex, Vectors, exact_cosines
from ember.memory.index.base import top_k as best_first
from ember.memory.index.fts import FtsIndex, query_terms
from ember.memory.models import TURN, Memory, MemoryFilter, MemoryHit
from ember.memory.retrieval import lexical
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Candidate, Ranked, Ranking, rank
from ember.memory.retrieval.timeframe import DAY, Window
from ember.store.driver import Connection

#: Candidates taken from each index: enough that filtering by scope and fusing two lists
#: still leaves ``top_k`` good ones, few enough to stay inside the search latency budget.
MIN_DEPTH = 40


def depth_for(top_k: int) -> int:
    return max(MIN_DEPTH, 4 * top_k)


def keywords_only(ranking: Ranking) -> Ranking:
    """The ranking to use while no query vector can be had (the embedder is loading or
    failed): the same absolute scale with the whole say given to keywords, so the floor keeps
    its meaning instead of dropping every hit for lack of a cosine."""
    if ranking.fusion == "norm":
        return dataclasses.replace(ranking, vector_weight=0.0)
    return dataclasses.replace(ranking, fusion="bm25")


def uses_vectors(ranking: Ranking, qvec: Vectors | None, index: VectorIndex | None) -> bool:
    return qvec is not None and index is not None and ranking.fusion != "bm25"


@dataclass(frozen=True)
class KeywordSide:
    """What FTS5 says about an ask: BM25 candidates (seq -> score) and the weight of each of
    the ask's content stems (empty when the ranking does not use the keyword share)."""

    hits: Mapping[int, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)


def term_weights(
    conn: Connection, fts: FtsIndex, query: MemoryQuery, counts: dict[str, int] | None = None
) -> dict[str, float]:
    """The weight of each content stem of the ask (``lexical.py``). The ask is the user's own
    words; context (tool outputs, assistant turns) only when they have none. ``counts``:
    document counts already taken in this snapshot (``FtsIndex.doc_counts``)."""
    terms = lexical.ask_terms([query.user_text])
    if not terms:
        terms = lexical.ask_terms(query.lexical_texts())
    if not terms:
        return {}
    df = fts.doc_counts(conn, list(terms.values()), counts)
    n = fts.size(conn)
    return {stem: lexical.term_weight(df.get(word, 0), n) for stem, word in terms.items()}


def keyword_side(
    conn: Connection,
    fts: FtsIndex,
    query: MemoryQuery,
    *,
    depth: int,
    ranking: Ranking,
    candidates: bool,
    alone: bool = False,
) -> KeywordSide:
    """BM25 candidates (when ``candidates``) and the ask's term weights (when ``norm`` ranks
    on the keyword share). ``alone``: no vector side runs (the embedder is loading or
    failed), so the candidates take the words most memories hold too (``FtsIndex.search``):
    nothing else would find a memory holding only those."""
    counts: dict[str, int] = {}  # one count per word, shared by the two uses
    terms = query_terms(query.lexical_texts())
    hits = dict(fts.search(conn, terms, depth, counts, common=alone)) if candidates else {}
    weights = {}
    if ranking.fusion == "norm" and ranking.lexical == "coverage":
        weights = term_weights(conn, fts, query, counts)
    return KeywordSide(hits, weights)


def vector_side(
    conn: Connection, index: VectorIndex | None, qvec: Vectors | None, depth: int
) -> dict[int, float]:
    """The ``depth`` nearest memories to ``qvec`` (seq -> cosine); none without a vector."""
    if index is None or qvec is None:
        return {}
    return dict(index.search(conn, qvec, depth))


#: The most memories a time window's candidates are drawn from. A window holding more ("this
#: year" in a store of years) adds none: its factor still ranks the other candidates, and
#: scoring every memory of a year would break the latency budget.
WINDOW_ROWS = 2_000
#: The widest seq range the window's keyword candidates are ranked over. Seqs follow insertion
#: and a window's memories are usually neighbours; an import out of time order can spread
#: them over the whole store, and BM25 over every match in it is what the postings budget
#: exists to avoid (the nearest ones still come from the window).
WINDOW_SPAN = 20_000


def window_side(
    conn: Connection,
    fts: FtsIndex,
    query: MemoryQuery,
    window: Window,
    qvec: Vectors | None,
    dim: int | None,
    depth: int,
) -> list[int]:
    """Seqs of the ``depth`` nearest and the ``depth`` best BM25 matches among memories
    created inside ``window`` (a day wider each side: "last night", said the morning after
    Halloween, is about Halloween). The turn that answers "what did we watch on Halloween?"
    may share no word with the ask and sit far below the global top 40: this is how it
    becomes a candidate at all. Nothing when the window holds more than ``WINDOW_ROWS``."""
    seqs = rows.current_between(conn, window.start - DAY, window.end + DAY, WINDOW_ROWS + 1)
    if not seqs or len(seqs) > WINDOW_ROWS:
        return []
    picked: set[int] = set()
    if qvec is not None and dim is not None:
        picked.update(s for s, _ in best_first(exact_cosines(conn, qvec, seqs, dim), depth))
    first, last = min(seqs), max(seqs)
    if last - first <= WINDOW_SPAN:
        inside = set(seqs)
        matches = fts.rank(conn, query_terms(query.lexical_texts()), None, (first, last))
        picked.update([s for s, _ in matches if s in inside][:depth])
    return sorted(picked)


#: The top hits whose replies (the next turns of their conversation) join the candidates.
REPLY_PARENTS = 10


def admitted(
    conn: Connection, seqs: Iterable[int], memory_filter: MemoryFilter | None
) -> dict[int, Memory]:
    """The current memories of ``seqs`` the filter admits, by seq (a memory deleted since a
    side looked is simply absent)."""
    memories = rows.by_seqs(conn, sorted(seqs))
    allowed = memory_filter or MemoryFilter()
    return {s: memories[s] for s in sorted(memories) if memories[s].is_current
            and allowed.admits(memories[s])}  # fmt: skip


def candidates_of(
    conn: Connection,
    pool: Mapping[int, Memory],
    qvec: Vectors | None,
    dim: int | None,
    vec_hits: Mapping[int, float],
    keywords: KeywordSide,
) -> list[Candidate]:
    """Each memory of ``pool`` scored exactly: its cosine (from the vector side, else
    computed here), BM25, the share of the ask's terms it holds and, for a turn, how many
    content terms it holds."""
    sims = {s: vec_hits[s] for s in pool if s in vec_hits}
    missing = [s for s in pool if s not in sims]
    if qvec is not None and dim is not None and missing:
        sims.update(exact_cosines(conn, qvec, missing, dim))
    cover: dict[str, float] = {}
    if keywords.weights:
        cover = lexical.coverages(keywords.weights, [(m.id, m.content) for m in pool.values()])
    return [
        Candidate(
            m.id, sims.get(s, 0.0), keywords.hits.get(s), m.created_at, cover.get(m.id),
            lexical.content_terms(m.content) if m.category == TURN else None,
        )
        for s, m in pool.items()
    ]  # fmt: skip


def replies_of(
    conn: Connection,
    pool: Mapping[int, Memory],
    ranked: Sequence[Ranked],
    memory_filter: MemoryFilter | None,
    depth: int = 1,
) -> tuple[dict[int, Memory], dict[str, str]]:
    """The replies (the next ``depth`` turns) of the top ``REPLY_PARENTS`` turns of ``pool``
    that are not in it yet, and reply id -> turn id for every reply found. A turn that
    follows two top hits answers the better ranked one."""
    seq_of = {m.id: s for s, m in pool.items()}
    tops = [seq_of[r.key] for r in ranked[:REPLY_PARENTS]]
    turns = [(s, pool[s].session_id, pool[s].created_at) for s in tops if pool[s].category == TURN]
    nexts = rows.next_turns(conn, turns, depth) if turns else {}
    new = [r for rs in nexts.values() for r in rs if r not in pool]
    added = admitted(conn, new, memory_filter)
    every = {**pool, **added}
    parent: dict[str, str] = {}
    for t in tops:  # best ranked first
        for r in nexts.get(t, ()):
            if r in every:
                parent.setdefault(every[r].id, every[t].id)
    return added, parent


def merge(
    conn: Connection,
    qvec: Vectors | None,
    dim: int | None,
    vec_hits: Mapping[int, float],
    keywords: KeywordSide,
    *,
    vectors: bool,
    top_k: int,
    memory_filter: MemoryFilter | None,
    ranking: Ranking,
    now: float,
    window: Window | None = None,
    more: Sequence[int] = (),
) -> list[MemoryHit]:
    """Load every side's candidates, keep the current ones the filter admits, score each
    exactly and rank; then the replies of the top turns join, and all are ranked again.
    ``vectors``: whether a query vector was searched with (``uses_vectors``); without one
    the keywords get the whole say. ``window``: the time the ask names, and ``more`` the
    candidates from inside it (``window_side``)."""
    pool = admitted(conn, set(vec_hits) | set(keywords.hits) | set(more), memory_filter)
    effective = ranking if vectors else keywords_only(ranking)
    found = candidates_of(conn, pool, qvec, dim, vec_hits, keywords)
    ranked = rank(found, now, effective, window=window)
    if ranking.reply_weight > 0:
        added, replies = replies_of(conn, pool, ranked, memory_filter, ranking.reply_depth)
        if replies:
            pool = {**pool, **added}
            found += candidates_of(conn, added, qvec, dim, vec_hits, keywords)
            ranked = rank(found, now, effective, window=window, replies=replies)
    return distinct(ranked, {m.id: m for m in pool.values()}, top_k)


def distinct(ranked: Sequence[Ranked], by_id: Mapping[str, Memory], top_k: int) -> list[MemoryHit]:
    """The first ``top_k`` hits, each fact once. A bubbled fact exists twice (where it was
    learnt and user-wide): it shows at the better rank, so one fact cannot take two of the
    ten injection slots."""
    seen: set[str] = set()
    hits: list[MemoryHit] = []
    for r in ranked:
        m = by_id[r.key]
        if m.content_hash in seen:
            continue
        seen.add(m.content_hash)
        hits.append(MemoryHit(m, r.score, r.similarity, r.lexical, r.recency, r.timing,
                              r.substance, r.reply_of))  # fmt: skip
        if len(hits) >= top_k:
            break
    return hits
