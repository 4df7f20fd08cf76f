"""How many new asks search memory at once; the others go on without (memory gives way first).

A new ask's search embeds its query: ~30-60 ms of CPU on a 2-core machine, most of what memory
adds to a request. With 8 agents asking at once, the default thread pool ran up to six
embeddings side by side on two cores, every ask waited behind the others', and the proxy
forwarded a third of what it did with memory off. So at most ``limit`` searches run at once;
an ask that finds them all taken is forwarded at once without memories — an ask is never held
for memory — and the count of such asks is logged, once a minute at most.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: At most one line this often about asks that went without memories.
REPORT_EVERY = 60.0


class AskGate:
    """Runs on the event loop only (no lock: enter and leave are never concurrent)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = max(1, limit)
        self.busy = 0
        #: asks that went without memories since the process started
        self.turned_away = 0
        self._clock = clock
        self._unreported = 0
        self._reported_at: float | None = None

    def enter(self) -> bool:
        """Take a search slot; False (counted) when every slot is taken."""
        if self.busy < self.limit:
            self.busy += 1
            return True
        self.turned_away += 1
        self._unreported += 1
        now = self._clock()
        if self._reported_at is None or now - self._reported_at >= REPORT_EVERY:
            log.warning(
                "memory: %d ask(s) went without memories: all %d search slots were busy "
                "(memory_concurrent_asks)",
                self._unreported,
                self.limit,
            )
            self._unreported, self._reported_at = 0, now
        return False

    def leave(self) -> None:
        self.busy = max(0, self.busy - 1)
