"""The keyword side of the score: which share of the ask's content terms a memory holds (pure).

BM25 grows with the store: the same memory matching the same ask scores ~1 in a one-memory
store and ~10 in a 100k-memory one (IDF is ``log(N / df)``), so a fused score built on it meant
less in a young project's store, and a floor calibrated on a large store dropped real asks in a
small one ("Where does this project deploy to?" against the project's deploy fact: 0.245).

``coverage`` is instead a share in [0, 1]: the IDF-weighted part of the ask's content terms
(stemmed like the FTS5 index, stop words removed) that occur in the memory. Each term's weight
depends on the *share* of memories holding it, not on how many there are, and is bounded:

    weight = clamp(ln((n + PRIOR_DOCS) / (df + 1)) / ln(RARE_RATIO), WEIGHT_FLOOR, 1)

A term in at most 1 memory in ``RARE_RATIO`` weighs 1, one in most memories ``WEIGHT_FLOOR``;
``PRIOR_DOCS`` pseudo-memories that hold no term keep a tiny store from calling every term
common (with one memory, a term it holds weighs 0.85). A term the store has never seen weighs 1
and stays in the denominator: an ask about something else is not covered by a memory that
shares its one common word.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import Stemmer  # type: ignore[import-not-found]

from ember.memory.index.fts import STOPWORDS

#: Pseudo-memories added to every store for the weights (see module doc).
PRIOR_DOCS = 100
#: A term in at most one memory in this many gets full weight.
RARE_RATIO = 100.0
#: The least a content term weighs, however common.
WEIGHT_FLOOR = 0.2
#: Content terms of the ask that count (the user's words first).
MAX_ASK_TERMS = 24

#: Words of an ask that name the project itself or a generic action: in a project's memory
#: every fact is about "this project" and most "use" something, so in a large store their IDF
#: is near zero anyway; a small store has no IDF to tell, so they are left out of the share
#: from the start (they still reach the FTS5 query).
GENERIC = frozenset(
    {"project", "projects", "repo", "repos", "repository", "codebase", "use", "uses", "used",
     "using", "work", "works", "make", "makes", "get", "gets", "need", "needs", "want", "wants",
     "thing", "things", "way", "like", "know", "tell", "show"}
)  # fmt: skip

#: FTS5's ``unicode61`` token: letters and digits; ``_`` and punctuation separate.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STEMMER = Stemmer.Stemmer("porter")


def _fold(token: str) -> str:
    """Lower case without diacritics, as ``unicode61`` (remove_diacritics 1) indexes it."""
    if token.isascii():
        return token.lower()
    decomposed = unicodedata.normalize("NFKD", token.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _stem(token: str) -> str:
    # SQLite's porter tokenizer leaves tokens of up to two characters alone.
    return token if len(token) <= 2 else str(_STEMMER.stemWord(token))


def tokens(text: str) -> list[tuple[str, str]]:
    """``(word, stem)`` for every token of ``text``, in order."""
    out = []
    for m in _TOKEN.finditer(text):
        word = _fold(m.group())
        if word:
            out.append((word, _stem(word)))
    return out


@lru_cache(maxsize=2048)
def stems(text: str) -> frozenset[str]:
    """Every stem of ``text`` (a memory's content is immutable: cached by its text)."""
    return frozenset(s for _, s in tokens(text))


def ask_terms(texts: Iterable[str], max_terms: int = MAX_ASK_TERMS) -> dict[str, str]:
    """Distinct content stems of the ask, first text first: ``{stem: a word that gives it}``.

    Stop words, ``GENERIC`` words and one-character ASCII tokens are left out (they say
    nothing about which memory is meant); the cap keeps a pasted log from making every memory
    a small share.
    """
    out: dict[str, str] = {}
    for text in texts:
        for word, stem in tokens(text):
            if word in STOPWORDS or word in GENERIC or stem in out:
                continue
            if len(word) < 2 and word.isascii():
                continue
            out[stem] = word
            if len(out) >= max_terms:
                return out
    return out


@lru_cache(maxsize=8192)
def content_terms(text: str) -> int:
    """How many distinct content terms ``text`` holds, counted as an ask's are (``ask_terms``,
    capped the same way); cached by text, since a memory's content never changes."""
    return len(ask_terms([text]))


def term_weight(df: int, n: int) -> float:
    """The weight of a term held by ``df`` of ``n`` memories (see module doc), in
    [WEIGHT_FLOOR, 1]."""
    idf = math.log((max(n, 0) + PRIOR_DOCS) / (max(df, 0) + 1))
    return min(max(idf / math.log(RARE_RATIO), WEIGHT_FLOOR), 1.0)


def coverage(weights: Mapping[str, float], memory_stems: frozenset[str]) -> float:
    """The weighted share of the ask's terms (``weights``: stem -> weight) in the memory;
    0 for an ask without content terms. Summed in sorted order: the same bytes every time."""
    total = math.fsum(weights[t] for t in sorted(weights))
    if total <= 0:
        return 0.0
    held = math.fsum(weights[t] for t in sorted(weights) if t in memory_stems)
    return held / total


def coverages(
    weights: Mapping[str, float], contents: Sequence[tuple[str, str]]
) -> dict[str, float]:
    """``coverage`` of each ``(key, content)``: the same floats, with the ask's terms sorted
    and summed once for all the candidates instead of once per candidate."""
    order = sorted(weights)
    total = math.fsum(weights[t] for t in order)
    if total <= 0:
        return {key: 0.0 for key, _ in contents}
    out: dict[str, float] = {}
    for key, text in contents:
        held = stems(text)
        out[key] = math.fsum(weights[t] for t in order if t in held) / total
    return out
