"""How many writes the databases of one process may keep in memory while their files are off.

A database switched off by a transient failure (disk full, unwritable, I/O error, locked for
long) keeps the writes submitted meanwhile — accounting rows, shadow and learning records —
and writes them when the file is back (``store.database``). Memory is the limit: one budget
per process, shared by every database, because a full disk switches off every file on it at
once and a per-file bound would multiply by the number of projects. A write past the budget is
dropped and counted (``Health.dropped``), never silently.
"""

from __future__ import annotations

import threading

#: Writes held at most, all databases of the process together. An accounting row is about
#: half a kilobyte in memory: 10,000 is ~5 MB, hours of requests of a few agents.
HOLD_WRITES = 10_000


class HoldLimit:
    """A counter of held writes against a fixed limit (thread-safe; 0 holds nothing)."""

    def __init__(self, limit: int = HOLD_WRITES) -> None:
        if limit < 0:
            raise ValueError(f"the hold limit must be 0 or more, not {limit}")
        self.limit = limit
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        return self._held

    def take(self, n: int = 1) -> bool:
        """Reserve room for ``n`` writes; False (nothing reserved) when they do not fit."""
        with self._lock:
            if self._held + n > self.limit:
                return False
            self._held += n
            return True

    def give(self, n: int) -> None:
        """Release room for ``n`` writes (written, or dropped after all)."""
        with self._lock:
            self._held = max(0, self._held - n)
