"""Vectors that can wait: a store's facts that nobody waits for, embedded within the CPU share.

A shadow's or traffic learning's facts (``add_many(background=True)``) are embedded at once
while memory's share of the machine (``share.CpuShare``) has credit, and charged for it. While
it is spent they are stored without vectors (found by their words at once) and ``catch_up``
embeds them later, a bounded batch at a time, when the share has credit again. Under 8 agents
whose every turn stated a fact, embedding those facts had been 15% of the proxy's samples,
more than the asks' searches, with no bound at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ember.memory.index.base import Vectors
from ember.memory.share import CpuShare, Notice

T = TypeVar("T")

log = logging.getLogger(__name__)


class Deferral:
    """Thread-safe enough: ``pending`` is a flag set and cleared by worker threads and read
    on the event loop; a stale read only delays or repeats a cheap ``catch_up``."""

    def __init__(
        self,
        share: CpuShare | None,
        embed: Callable[[Sequence[str]], Vectors | None],
        backfill: Callable[[int], int],
    ) -> None:
        """``backfill(limit)`` embeds up to ``limit`` current memories without a vector."""
        self._share, self._embed, self._backfill = share, embed, backfill
        self.pending = False
        self._notice = Notice(log)

    def embed(self, texts: Sequence[str]) -> Vectors | None:
        """The texts' vectors, or None (stored without, ``pending``) while the share is spent."""
        if self._share is not None and not self._share.available():
            self.pending = True
            self._notice.add(
                len(texts),
                "fact(s) stored without their vectors for now (memory_cpu_share spent); "
                "found by their words until the machine has room",
            )
            return None
        return self._charged(lambda: self._embed(texts))

    def catch_up(self, limit: int) -> int:
        """Embed up to ``limit`` of the facts left without vectors, if the share allows now."""
        if not self.pending or (self._share is not None and not self._share.available()):
            return 0
        done = self._charged(lambda: self._backfill(limit))
        if done < limit:
            self.pending = False
        return done

    def _charged(self, work: Callable[[], T]) -> T:
        started = time.monotonic()
        try:
            return work()
        finally:
            if self._share is not None:
                self._share.charge(time.monotonic() - started)
