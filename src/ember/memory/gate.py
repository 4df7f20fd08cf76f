"""Which new asks search memory: memory gives way first, and never holds an ask.

A new ask's search embeds its query and ranks candidates: ~6 ms of CPU, most of what memory
adds to a request. Two bounds keep that from taking the forwarding's CPU when asks flood in:

- **slots**: at most ``limit`` searches at once (one per core by default). With 8 agents
  asking at once, the default thread pool ran six embeddings side by side on two cores and
  every ask waited behind the others'.
- **a share of the machine**: searches may use at most ``share`` of the cores' time on
  average (a token bucket of search seconds: refilled at ``share x cores`` per second, holding
  at most ``burst``). Slots alone still let memory take every core: with two slots on two
  cores, 8 agents x 25 new asks each ran at 0.54 of direct, ember's own forwarding at 0.89.
  A search is charged its wall time, so on a machine that is already loaded (where a
  search takes longer) memory gives way sooner. People and agents ask seconds apart: 8 agents
  asking every 5 s spend ~1% of a core here, far from the bound; only a flood meets it.

An ask that meets either bound is forwarded at once without memories, counted, and logged
once a minute at most.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: At most one line this often about asks that went without memories.
REPORT_EVERY = 60.0
#: Search seconds that may be spent back to back before the share applies (~80 asks).
BURST_SECONDS = 0.5


class AskGate:
    """Runs on the event loop only (no lock: enter and leave are never concurrent)."""

    def __init__(
        self,
        limit: int,
        share: float = 1.0,
        *,
        cores: int | None = None,
        burst: float = BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = max(1, limit)
        self.rate = max(0.0, share) * (cores or os.cpu_count() or 1)
        self.burst = burst
        self.busy = 0
        #: asks that went without memories since the process started
        self.turned_away = 0
        self._clock = clock
        self._credit = burst
        self._credit_at = clock()
        self._unreported = 0
        self._reported_at: float | None = None

    def enter(self) -> bool:
        """Take a search slot; False (counted) when every slot is taken or the searches of
        late have used their share of the machine."""
        now = self._clock()
        self._credit = min(self.burst, self._credit + (now - self._credit_at) * self.rate)
        self._credit_at = now
        if self.busy < self.limit and self._credit > 1e-9:  # float sums of charges: not > 0
            self.busy += 1
            return True
        why = f"all {self.limit} search slots were busy (memory_concurrent_asks)"
        if self.busy < self.limit:
            why = "searches used their share of the CPU (memory_cpu_share)"
        self._turn_away(now, why)
        return False

    def leave(self, seconds: float = 0.0) -> None:
        """Give the slot back; ``seconds``: what the search took (charged to the share)."""
        self.busy = max(0, self.busy - 1)
        self._credit -= max(0.0, seconds)

    def _turn_away(self, now: float, why: str) -> None:
        self.turned_away += 1
        self._unreported += 1
        if self._reported_at is None or now - self._reported_at >= REPORT_EVERY:
            log.warning("memory: %d ask(s) went without memories: %s", self._unreported, why)
            self._unreported, self._reported_at = 0, now
