"""Which new asks search memory: memory gives way first, and never holds an ask.

A new ask's search embeds its query and ranks candidates: ~6 ms of CPU, most of what memory
adds to a request. Two bounds keep that from taking the forwarding's CPU when asks flood in:

- **slots**: at most ``limit`` searches at once (one per core by default). With 8 agents
  asking at once, the default thread pool ran six embeddings side by side on two cores and
  every ask waited behind the others'.
- **a share of the machine** (``share.CpuShare``, ``memory_cpu_share``). Slots alone still let
  memory take every core: with two slots on two cores, 8 agents x 25 new asks each ran at 0.54
  of direct, ember's own forwarding at 0.89. 8 agents asking every 5 s spend ~1% of a core
  here, far from the bound; only a flood meets it.

An ask that meets either bound is forwarded at once without memories, counted, and logged
once a minute at most.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable

from ember.memory.share import CpuShare, Notice

log = logging.getLogger(__name__)


class AskGate:
    """Runs on the event loop only (no lock: enter and leave are never concurrent)."""

    def __init__(
        self,
        limit: int,
        share: CpuShare | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``share``: the process's ``CpuShare`` (the router's, shared with the fact
        writers); None: all of every core, so only the slots bound the searches."""
        self.limit = max(1, limit)
        self.share = share or CpuShare()
        self.busy = 0
        #: asks that went without memories since the process started, by bound: ``slots``
        #: (every slot taken) or ``cpu_share`` (memory's share of the machine spent)
        self.turned_away_by: collections.Counter[str] = collections.Counter()
        self._notice = Notice(log, clock=clock)

    def enter(self) -> bool:
        """Take a search slot; False (counted) when every slot is taken or memory's work of
        late has used its share of the machine."""
        if self.busy < self.limit and self.share.available():
            self.busy += 1
            return True
        bound, why = "slots", f"all {self.limit} search slots were busy (memory_concurrent_asks)"
        if self.busy < self.limit:
            bound, why = "cpu_share", "memory used its share of the CPU (memory_cpu_share)"
        self.turned_away_by[bound] += 1
        self._notice.add(1, f"ask(s) went without memories: {why}")
        return False

    def gave_up(self, seconds: float) -> None:
        """An ask stopped waiting for its search after ``seconds`` (the store is slow or
        hung): counted and logged as a bound of its own; the slot stays taken until the
        search ends (``leave``), so a hung store fills the slots and later asks go on at once."""
        self.turned_away_by["search_wait"] += 1
        why = f"their search took over {seconds:g} s (memory_search_wait): is the store slow?"
        self._notice.add(1, f"ask(s) went without memories: {why}")

    @property
    def turned_away(self) -> int:
        """Asks that went without memories since the process started."""
        return self.turned_away_by.total()

    def leave(self, seconds: float = 0.0) -> None:
        """Give the slot back; ``seconds``: what the search took (charged to the share)."""
        self.busy = max(0, self.busy - 1)
        self.share.charge(seconds)
