"""A mapping that keeps at most ``limit`` entries, the least recently set going first.

The per-session books of the proxy's observers (traffic learning, TOIN) must stay the same
size in a proxy that runs for weeks and sees endless one-off sessions, calls and noise; each
used to carry its own copy of the same move-to-end-and-evict loop.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(OrderedDict[K, V]):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> None:
        """Set ``key`` as the newest entry; past the limit the oldest are dropped."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)

    def first_sight(self, key: K, value: V) -> bool:
        """Record ``key`` unless it is there already; True when it was not (a key seen
        before keeps its place: seeing it again does not make it newer)."""
        if key in self:
            return False
        self.put(key, value)
        return True
