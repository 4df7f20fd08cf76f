"""The memory block, ``<!-- ember:memory:start -->`` ... ``<!-- ember:memory:end -->``: the
general marker rules (``ember.markers``) under memory's name and error type.

A re-export replaces exactly that span; every byte before and after it stays as it was. A file
without the markers gets the block appended; broken markers are refused, never guessed.
"""

from __future__ import annotations

from ember.markers import MarkerError, Markers
from ember.memory.errors import MemoryInputError

MEMORY = Markers("memory")
START = MEMORY.start
END = MEMORY.end


def wrap(body: str, newline: str = "\n") -> str:
    """``body`` between the markers (no trailing newline after the end marker)."""
    return MEMORY.wrap(body, newline)


def merge(existing: str, block: str, *, where: str = "the file", newline: str = "\n") -> str:
    """``existing`` with its marker span replaced by ``block`` (which includes the markers),
    or ``block`` appended after one blank line when there is no span yet."""
    try:
        return MEMORY.merge(existing, block, where=where, newline=newline)
    except MarkerError as exc:
        raise MemoryInputError(str(exc)) from exc
