"""Whether a new fact says what a current one says, in other words (pure).

The same fact comes in by several doors in different words — saved over MCP, then extracted by
the shadow; stated in one session, restated in the next — and two current copies are both
injected, the stale one first. A new fact *restates* a current one of the same scope when

- their meanings are close (cosine of their vectors >= ``RESTATE_COSINE``),
- they name the same values — numbers, versions, names, hosts, paths, flags — exactly: a
  changed port or version is a correction, never a restatement (their cosines reach 0.97), and
- their content words differ by at most one word on each side ("We deploy to Fly.io" /
  "Deploys go to Fly.io"), so "the frontend uses React 18" does not swallow "the admin panel
  uses React 18".

What becomes of it (``Restatement``): a new fact that says less than the old one (its content
words a strict part of the old's) is the old one again: the old is kept, the new not stored;
otherwise the new replaces the old as the newer wording (the old ends, kept as history) — so
"prefers spaces over tabs" after "prefers tabs over spaces" (the same words, cosine 0.99)
leaves the newest statement current, and a false match never loses it.
Measured with the shipped MiniLM on paraphrases (0.86-0.97) and on near-miss contradictions
(other value 0.96-0.97, other platform 0.50, "no longer" 0.74) in ``tests/memory``.
"""

from __future__ import annotations

import re
from enum import Enum

from ember.memory.index.fts import STOPWORDS
from ember.memory.retrieval.lexical import tokens

#: The least cosine at which two facts may be one (paraphrases measured 0.86-0.97).
RESTATE_COSINE = 0.85

_WORD = re.compile(r"\S+")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")
_POSSESSIVE = re.compile(r"['’]s$")
_VALUE_INSIDE = re.compile(r"\w[./:_@#=+-]\w")


class Restatement(Enum):
    """What a new fact is to a current one."""

    NONE = "none"  # another fact
    SAME = "same"  # the old one says all of it: keep the old, store nothing
    REWORDED = "reworded"  # newer words for the same fact: the new replaces the old


def values(text: str) -> frozenset[str]:
    """The exact things a fact names: words with a digit, with a capital past the sentence's
    first word (names: PostgreSQL, Fly.io, API), or with punctuation inside (paths, hosts,
    flags, versions), lower-cased."""
    out = set()
    first = True
    for raw in _WORD.findall(text):
        word = _POSSESSIVE.sub("", _EDGE.sub("", raw))
        if not word:
            continue
        named = any(c.isupper() for c in word) and not first
        if named or any(c.isdigit() for c in word) or _VALUE_INSIDE.search(word):
            out.add(word.lower())
        first = raw[-1] in ".!?:;"
    return frozenset(out)


def content_words(text: str) -> frozenset[str]:
    """The stems of the words that carry meaning (stop words left out)."""
    return frozenset(stem for word, stem in tokens(text) if word not in STOPWORDS and len(word) > 1)


def restatement(new: str, old: str, cosine: float) -> Restatement:
    """What ``new`` is to the current fact ``old`` whose vectors have ``cosine``."""
    if cosine < RESTATE_COSINE or values(new) != values(old):
        return Restatement.NONE
    a, b = content_words(new), content_words(old)
    if len(a - b) > 1 or len(b - a) > 1:
        return Restatement.NONE
    return Restatement.SAME if a < b else Restatement.REWORDED
