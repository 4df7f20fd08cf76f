"""Whether an answer cites the memories injected before it: the dashboard's "used" signal.

An injected memory counts as **cited** when one of the (at most four) assistant messages
recorded after the ask it was appended to shares enough of its content words: at least three
distinct ones, or all but one of them for a memory of four or fewer. Words are lower-cased,
stemmed the way the keyword index stems them, and stop words and generic words ("project",
"use") do not count (``retrieval.lexical.ask_terms``).

How far to trust it: it sees words, not meaning. A model that acts on a fact without repeating
its words (it ran ``pnpm`` because the memory said the project uses pnpm, and said so only in a
tool call's arguments, which are part of the recorded message) is counted when those arguments
hold the words, and missed when they do not; a memory made of words the conversation uses
anyway ("the API tests") can be counted though the model never read it. It is a hint for a
person looking at one session, not a metric to optimise.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.memory.retrieval.lexical import ask_terms


def words(text: str) -> set[str]:
    """The content stems of ``text``, as the keyword side counts an ask's (no stop words, no
    generic words like "project" or "use": in a project's memory every fact has them)."""
    return set(ask_terms([text], max_terms=10_000))


def cites(memory: str, answer: set[str]) -> bool:
    own = words(memory)
    if not own:
        return False
    shared = len(own & answer)
    return shared >= 3 or (len(own) <= 4 and shared >= max(1, len(own) - 1))


def cited(memories: Sequence[str], answers: Sequence[str]) -> bool:
    """Whether any of ``memories`` is cited by the ``answers`` after it."""
    said: set[str] = set()
    for a in answers:
        said |= words(a)
    return any(cites(m, said) for m in memories)
