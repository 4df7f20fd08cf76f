"""Fusion of vector and BM25 results, the recency boost, and the deterministic order.

The score a hit carries is the one number everything uses: ``ember memory search`` prints it,
results are ranked by it and injection keeps a hit only when it reaches the calibrated floor
(``budget.MIN_SCORE_FLOOR``). Two numbers for one decision — a fused score shown, a raw cosine
filtered on — once dropped "where does this project deploy to?" at cosine 0.26 against the
very fact that answered it.

Fusions (``Ranking.fusion``):

- ``norm`` (the default, chosen on the dev splits of ``bench/memory_quality.py``): each
  retriever gets an equal say on an absolute scale, so the score means the same for every ask
  and a floor on it can tell "nothing relevant" apart:
  ``w x cos' + (1 - w) x coverage``, where ``cos'`` rescales the cosine so that unrelated
  text (``cosine_zero``: ~0 for MiniLM, ~0.7 for e5) maps to 0, and ``coverage`` is the
  IDF-weighted share of the ask's content terms the memory holds (``lexical.py``): a share
  means the same in a one-memory store and a 100k-memory one, so one floor serves both.
  ``Ranking(lexical="bm25")`` keeps the former keyword part, ``bm25 / (bm25 + h)``, whose
  scale grows with the store (IDF is ``log(N / df)``). A relative normalisation (BM25 / best
  BM25) would give the best keyword match of *any* ask full marks and defeat the floor.
- ``mix``: the former default, ``0.9 x cosine + 0.1 x BM25 / best BM25``. It was tuned on the
  project's own generated set and falls below BM25 alone on conversations it did not write.
- ``rrf``: reciprocal rank fusion (rank only: its score says nothing absolute).
- ``vector`` and ``bm25``: one retriever alone, for comparison.

Recency is an optional bounded boost: ``relevance x ((1 - w) + w x exp(-age_days / 30))``;
bounded, an old strong match still beats a fresh weak one (a 30-day-old memory loses 16% at
``w = 0.25``, a year-old one 25%). The shipped ranking sets ``w = 0`` (see
``CHOSEN_RECENCY_WEIGHT``).

An ask that names a time ("on Halloween", "last week": ``timeframe.ask_window``) weighs the
same way by closeness to that window instead of by age:
``relevance x ((1 - t) + t x exp(-days_outside / spread))``, 1 inside the window
(``window_factor``). Bounded too: a memory from another week keeps ``1 - t`` of its score,
so a strong match outside the window can still win, and a floor passed with the window
means the memory matched the ask itself, not only its date.

A turn of an imported conversation (``models.TURN``) is often matched by the ask while its
reply holds the answer: "what time is the party?" matches the question, "at 7 tonight"
answers it and shares no word with the ask. A reply of a top hit scores at least
``reply_weight x`` that hit's own score (``inherit``), so it ranks right below it. The next
``reply_depth`` turns count as replies (1 as shipped; in a chat the answer is sometimes two
turns on, after a follow-up, but counting them did not pay on held-out chats).

A turn that holds almost nothing scores less (``substance``): ``relevance x sqrt(terms /
short_turn_terms)`` for a turn with fewer content terms than ``short_turn_terms``. A greeting
that names a person ("ADAM!!!", "Natalie! / Hey you!") holds the ask's rarest word, and its
embedding is mostly that name, so it outranked the turn holding the answer for every ask that
named the person. Facts are never scaled: "Uses pnpm" is a whole fact in two words.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ember.memory.retrieval.timeframe import Window

Fusion = Literal["norm", "rrf", "mix", "vector", "bm25"]
FUSIONS: tuple[Fusion, ...] = ("norm", "rrf", "mix", "vector", "bm25")
#: The keyword part of ``norm``: the share of the ask's terms a memory holds (``lexical.py``,
#: the same for a store of any size) or the former saturated BM25 (grows with the store).
Lexical = Literal["coverage", "bm25"]
LEXICALS: tuple[Lexical, ...] = ("coverage", "bm25")
RRF_K = 60
MIX_VECTOR_WEIGHT = 0.9
DECAY_DAYS = 30.0
RECENCY_WEIGHT = 0.25
_DAY = 86400.0
#: ``norm`` defaults, chosen on the dev splits of bench/memory_quality.py (generated,
#: agent-logs and the real chats of chitchat; docs/benchmarks-history.md): the grid's best MRR among
#: settings within one question of its best recall@10, both summed over the dev sets (questions
#: found, each set's MRR). ``--tune`` prints the pick. With time-aware asks and replies on,
#: 0.6 (196 found, MRR sum 1.865) beat 0.8 (197, 1.842), chosen before either and the chats.
VECTOR_WEIGHT = 0.6
LEXICAL_HALF = 8.0
#: Recency's weight in the shipped ranking. Every dev set lost recall with it (0.25 cost 5
#: points): an outdated fact is superseded and leaves the index, so age alone says little about
#: relevance. ``mix`` kept 0.25, and the option stays for comparison.
CHOSEN_RECENCY_WEIGHT = 0.0
#: How much an ask's time window weighs (``window_factor``); 0 switches time-aware asks off.
#: Chosen on the dev splits (docs/benchmarks-history.md): 0.3, 0.5 and 0.7 each found one more
#: chitchat question in the top 10 and changed nothing else; the smallest was kept.
TIME_WEIGHT = 0.3
#: Closeness outside a window decays over ``max(1 day, window length x TIME_SPREAD)``: a turn
#: saying "last night" the morning after Halloween is still close to "on Halloween".
TIME_SPREAD = 0.25
#: The share of a turn's score its reply inherits (``inherit``; 0 switches it off). Chosen on
#: the dev splits (docs/benchmarks-history.md): 0.7 found three more chitchat questions and changed
#: nothing on the other sets; 0.8 and 0.9 cost agent-log and generated questions.
REPLY_WEIGHT = 0.7
#: How many turns after a top hit count as its replies. 2 found one more dev question on each
#: chat store (3 and 4 no more), but lost one net on the 156 real-chat questions nothing was
#: chosen on: noise either way, so the simpler 1 stays (docs/benchmarks-history.md).
REPLY_DEPTH = 1
#: A conversation turn with fewer content terms than this scores less (``substance``; 0
#: switches it off). Chosen on the dev splits with the vector weight (docs/benchmarks-history.md):
#: 3-5 with a square root or linear scale all found 2-6 more questions than none; 4 with the
#: square root had the best MRR among those within one question of the most found.
SHORT_TURN_TERMS = 4


@dataclass(frozen=True)
class Ranking:
    """How candidates are scored; every part can be switched for a comparison.

    ``cosine_zero`` belongs to the embedder (what its cosine is for unrelated text), the rest
    to the policy. Frozen and hashable: the same ``Ranking`` and candidates give the same order.
    """

    fusion: Fusion = "norm"
    vector_weight: float = VECTOR_WEIGHT
    lexical_half: float = LEXICAL_HALF
    cosine_zero: float = 0.0
    recency_weight: float = CHOSEN_RECENCY_WEIGHT
    lexical: Lexical = "coverage"
    time_weight: float = TIME_WEIGHT
    reply_weight: float = REPLY_WEIGHT
    reply_depth: int = REPLY_DEPTH
    short_turn_terms: int = SHORT_TURN_TERMS

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {self.fusion!r}; expected one of {FUSIONS}")
        if self.lexical not in LEXICALS:
            raise ValueError(f"unknown lexical {self.lexical!r}; expected one of {LEXICALS}")
        weights = (self.vector_weight, self.time_weight, self.reply_weight)
        if not all(0.0 <= w <= 1.0 for w in weights):
            raise ValueError("vector_weight, time_weight and reply_weight must be within [0, 1]")
        if self.lexical_half <= 0 or not 0.0 <= self.cosine_zero < 1.0:
            raise ValueError("lexical_half must be > 0 and cosine_zero within [0, 1)")
        if self.short_turn_terms < 0:
            raise ValueError("short_turn_terms must be >= 0 (0 switches it off)")
        if self.reply_depth < 1:
            raise ValueError("reply_depth must be >= 1 (reply_weight 0 switches replies off)")


@dataclass(frozen=True)
class Candidate:
    """One memory found by either index, with its exact cosine, its BM25 score (if any), the
    share of the ask's terms it holds (``lexical.coverage``; None when not computed) and, for a
    conversation turn, how many content terms it holds (``lexical.content_terms``; None for a
    fact, which ``substance`` never scales)."""

    key: str  # the memory id: the final tie-breaker
    similarity: float
    bm25: float | None
    created_at: float | None
    coverage: float | None = None
    terms: int | None = None


@dataclass(frozen=True)
class Ranked:
    """A candidate's score and the parts it was made of: ``substance`` the short-turn factor
    and ``reply_of`` the turn whose score a reply inherited (None when it kept its own)."""

    key: str
    score: float
    similarity: float
    lexical: float | None
    recency: float
    timing: float = 1.0
    substance: float = 1.0
    reply_of: str | None = None


def recency_factor(created_at: float | None, now: float, decay_days: float = DECAY_DAYS) -> float:
    """``exp(-age_days / decay_days)``; unknown or future times are neutral (1.0).

    A future timestamp (clock skew between machines, an import with a typo) must not make a
    memory outrank everything, and an unknown age must not bury it.
    """
    if created_at is None or created_at >= now or decay_days <= 0:
        return 1.0
    return math.exp(-((now - created_at) / _DAY) / decay_days)


def window_factor(created_at: float | None, window: Window | None, weight: float) -> float:
    """``(1 - w) + w x closeness`` to the ask's window (module doc); 1 without a window or a
    date, so an ask naming no time ranks exactly as before."""
    if window is None or created_at is None or weight <= 0:
        return 1.0
    w = min(weight, 1.0)
    return (1.0 - w) + w * math.exp(-window.distance(created_at) / window_spread(window))


def substance(terms: int | None, full: int) -> float:
    """``sqrt(terms / full)`` for a turn holding fewer than ``full`` content terms, else 1
    (module doc); a fact (``terms`` None) or ``full`` 0 is never scaled."""
    if terms is None or full <= 0 or terms >= full:
        return 1.0
    return math.sqrt(max(terms, 0) / full)


def window_spread(window: Window) -> float:
    """Seconds over which closeness outside ``window`` decays by a factor e."""
    return max(window.days * TIME_SPREAD, 1.0) * _DAY


def inherit(ranked: list[Ranked], replies: Mapping[str, str], weight: float) -> list[Ranked]:
    """Each reply's score raised to ``weight`` x its turn's *own* score (never an inherited
    one: a chain of replies cannot carry a match down a whole conversation)."""
    own = {r.key: r.score for r in ranked}
    out = []
    for r in ranked:
        parent = own.get(replies.get(r.key, ""))
        if parent is not None and round(weight * parent, 9) > r.score:
            r = dataclasses.replace(r, score=round(weight * parent, 9), reply_of=replies[r.key])
        out.append(r)
    return out


def _ranks(values: dict[str, float]) -> dict[str, int]:
    order = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    return {k: i + 1 for i, (k, _) in enumerate(order)}


def rescaled_cosine(similarity: float, zero: float) -> float:
    """The cosine on a 0..1 scale where ``zero`` (unrelated text) is 0."""
    return min(max((similarity - zero) / (1.0 - zero), 0.0), 1.0)


def saturated_bm25(bm25: float | None, half: float) -> float:
    """``bm25 / (bm25 + half)``: 0 without a keyword match, 0.5 at ``half``, below 1 always."""
    return 0.0 if bm25 is None or bm25 <= 0 else bm25 / (bm25 + half)


def lexical_part(c: Candidate, ranking: Ranking) -> float:
    """The keyword part of ``norm`` in [0, 1]: the ask's share held, or saturated BM25."""
    if ranking.lexical == "coverage":
        return min(max(c.coverage or 0.0, 0.0), 1.0)
    return saturated_bm25(c.bm25, ranking.lexical_half)


def relevance(
    candidates: Sequence[Candidate], fusion: Fusion | Ranking = "mix"
) -> dict[str, float]:
    """Relevance in [0, 1] for each candidate under ``fusion``."""
    ranking = fusion if isinstance(fusion, Ranking) else Ranking(fusion)
    fusion = ranking.fusion
    if fusion == "norm":
        w, zero = ranking.vector_weight, ranking.cosine_zero
        return {
            c.key: w * rescaled_cosine(c.similarity, zero) + (1 - w) * lexical_part(c, ranking)
            for c in candidates
        }
    sims = {c.key: max(c.similarity, 0.0) for c in candidates}
    bm25 = {c.key: c.bm25 for c in candidates if c.bm25 is not None and c.bm25 > 0}
    best = max(bm25.values(), default=0.0)
    lex = {k: v / best for k, v in bm25.items()} if best > 0 else {}
    if fusion == "vector":
        return sims
    if fusion == "bm25":
        return {c.key: lex.get(c.key, 0.0) for c in candidates}
    if fusion == "mix":
        w = MIX_VECTOR_WEIGHT
        return {k: w * s + (1 - w) * lex.get(k, 0.0) for k, s in sims.items()}
    # A memory pointing away from the query (cosine <= 0) gets no vector rank: RRF would
    # otherwise reward it just for being among few candidates.
    vec_rank, lex_rank = _ranks({k: v for k, v in sims.items() if v > 0}), _ranks(bm25)
    top = 2.0 / (RRF_K + 1)
    out: dict[str, float] = {}
    for c in candidates:
        s = 1.0 / (RRF_K + vec_rank[c.key]) if c.key in vec_rank else 0.0
        if c.key in lex_rank:
            s += 1.0 / (RRF_K + lex_rank[c.key])
        out[c.key] = s / top
    return out


def recency_boost(created_at: float | None, now: float, weight: float | None = None) -> float:
    """The multiplier ranking applies: ``(1 - w) + w x recency_factor`` (see module doc)."""
    w = RECENCY_WEIGHT if weight is None else min(max(weight, 0.0), 1.0)
    return (1.0 - w) + w * recency_factor(created_at, now)


def rank(
    candidates: Sequence[Candidate],
    now: float,
    fusion: Fusion | Ranking = "norm",
    recency_weight: float | None = None,
    window: Window | None = None,
    replies: Mapping[str, str] | None = None,
) -> list[Ranked]:
    """Candidates by ``relevance x recency boost x window factor x substance``, best first;
    equal scores newer first, then by id. ``replies`` (reply key -> the key of the turn it
    answers): each reply's score is at least ``reply_weight`` x that turn's own score.

    Scores are rounded to 9 decimals before comparing, so float noise from a different
    summation order cannot swap two memories and change the injected bytes.
    """
    if isinstance(fusion, Ranking):
        ranking = fusion
    else:  # a bare fusion name keeps the former bounded recency boost
        ranking = Ranking(fusion, recency_weight=RECENCY_WEIGHT)
    if recency_weight is None:
        recency_weight = ranking.recency_weight
    rel = relevance(candidates, ranking)
    bm25 = {c.key: c.bm25 for c in candidates if c.bm25 is not None and c.bm25 > 0}
    best = max(bm25.values(), default=0.0)
    out = []
    for c in candidates:
        rec = recency_boost(c.created_at, now, recency_weight)
        timing = round(window_factor(c.created_at, window, ranking.time_weight), 9)
        if ranking.fusion == "norm" and ranking.lexical == "coverage":
            lexical = round(c.coverage, 9) if c.coverage else None
        else:
            lexical = round(bm25[c.key] / best, 9) if c.key in bm25 and best > 0 else None
        held = substance(c.terms, ranking.short_turn_terms)
        score = round(rel[c.key] * rec * timing * held, 9)
        out.append(
            Ranked(c.key, score, round(c.similarity, 9), lexical, rec, timing, round(held, 9))
        )
    if replies and ranking.reply_weight > 0:
        out = inherit(out, replies, ranking.reply_weight)
    # Equal scores: the newer memory first (a fact restated later is the one to show), then id.
    age = {c.key: round(recency_factor(c.created_at, now), 9) for c in candidates}
    return sorted(out, key=lambda r: (-r.score, -age[r.key], r.key))
