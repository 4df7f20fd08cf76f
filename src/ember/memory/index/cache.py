"""A small LRU of memories by id, so repeated ``get``s do not hit SQLite.

It is only a cache: the store stays the truth. The coordinator updates it after a commit,
never before (a rolled-back change must not be served), and clears it when another
connection wrote to the file (``PRAGMA data_version`` moved), so a CLI ``delete`` is seen by a
running proxy at its next call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from ember.memory.models import Memory


class LruCache:
    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = max(0, capacity)
        self._items: OrderedDict[str, Memory] = OrderedDict()

    def get(self, memory_id: str) -> Memory | None:
        m = self._items.get(memory_id)
        if m is not None:
            self._items.move_to_end(memory_id)
        return m

    def put(self, memories: Iterable[Memory]) -> None:
        if not self._capacity:
            return
        for m in memories:
            self._items[m.id] = m
            self._items.move_to_end(m.id)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def discard(self, memory_ids: Iterable[str]) -> None:
        for i in memory_ids:
            self._items.pop(i, None)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
