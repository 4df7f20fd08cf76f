"""Whether an answer cites the memories injected before it: the dashboard's "cited" signal.

An injected memory counts as **cited** when one of the (at most ``WINDOW``, four) assistant
messages recorded after the ask it was appended to shares enough of its content words: at
least three distinct ones, or all but one of them for a memory of four or fewer. Words are
lower-cased, stemmed the way the keyword index stems them, and stop words and generic words
("project", "use") do not count (``retrieval.lexical.ask_terms``).

The memory's words are those of the block as it was injected (``injected_texts``), never of
the memory as it is now: the block is the ledger's record of what the model read, and the
answers are the transcript's, so a request's verdict depends only on what was recorded when
it was answered. Read from the live memories instead, a memory forgotten or edited later
turned an old request's "cited" into "not cited".

How far to trust it: it sees words, not meaning. A model that acts on a fact without repeating
its words (it ran ``pnpm`` because the memory said the project uses pnpm, and said so only in a
tool call's arguments, which are part of the recorded message) is counted when those arguments
hold the words, and missed when they do not; a memory made of words the conversation uses
anyway ("the API tests") can be counted though the model never read it. It is a hint for a
person looking at one session, not a metric to optimise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ember.memory.retrieval.lexical import ask_terms

#: How many assistant messages after an ask are read for citations.
WINDOW = 4

#: One line of an injected block, as ``retrieval.render.render_line`` writes it.
_LINE = re.compile(r"^- \[([^\]\s]+)\] \(\d{4}-\d{2}-\d{2}\) (.*)$")


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


def injected_texts(block: str, memory_ids: Sequence[str]) -> dict[str, str]:
    """Each of ``memory_ids`` with the text the block carried for it. An id the block has no
    line of is the fact a user-wide copy was promoted from (the ledger keeps it right after
    the copy's id, ``stage.fact_keys``): it gets the copy's text, the words the model read."""
    lines = {}
    for line in block.splitlines():
        found = _LINE.match(line)
        if found is not None:
            lines[found.group(1)] = found.group(2)
    texts: dict[str, str] = {}
    last: str | None = None
    for memory_id in memory_ids:
        if memory_id in lines:
            last = lines[memory_id]
        if last is not None:
            texts[memory_id] = lines.get(memory_id, last)
    return texts


def cited_ids(texts: Mapping[str, str], answers: Sequence[str]) -> list[str]:
    """The ids (in ``texts``' order) whose text the ``answers`` cite."""
    said: set[str] = set()
    for a in answers:
        said |= words(a)
    return [memory_id for memory_id, text in texts.items() if cites(text, said)]
