"""Merging ember's block into a user's file without touching anything else (pure).

The block sits between ``<!-- ember:memory:start -->`` and ``<!-- ember:memory:end -->``. A
re-export replaces exactly that span; every byte before and after it stays as it was. A file
without the markers gets the block appended. A file whose markers are broken (a start with no
end, an end before the start, two starts) is refused: guessing where the block ends could
delete the user's own text.
"""

from __future__ import annotations

from ember.memory.errors import MemoryInputError

START = "<!-- ember:memory:start -->"
END = "<!-- ember:memory:end -->"


def wrap(body: str, newline: str = "\n") -> str:
    """``body`` between the markers (no trailing newline after the end marker)."""
    lines = [START, *body.splitlines(), END]
    return newline.join(lines)


def merge(existing: str, block: str, *, where: str = "the file", newline: str = "\n") -> str:
    """``existing`` with its marker span replaced by ``block`` (which includes the markers),
    or ``block`` appended after one blank line when there is no span yet."""
    starts = existing.count(START)
    ends = existing.count(END)
    if starts == 0 and ends == 0:
        if not existing:
            return block + newline
        sep = "" if existing.endswith("\n") else newline
        return existing + sep + newline + block + newline
    i = existing.find(START)
    j = existing.find(END)
    if starts != 1 or ends != 1 or j < i:
        raise MemoryInputError(
            f"{where} has unmatched ember markers ({starts} start, {ends} end); fix or remove "
            f"the lines {START!r} / {END!r} and export again"
        )
    return existing[:i] + block + existing[j + len(END) :]
