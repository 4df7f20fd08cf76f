"""Memory's share of the machine: a token bucket of CPU seconds, one per proxy process.

Memory's work that no answer waits for on the spot — a new ask's search, the vectors of facts
a shadow or traffic learning has just found — may use at most ``share`` of the cores' time on
average (refilled at ``share x cores`` seconds per second, holding at most ``burst``). Work is
charged its wall time, so on a machine that is already loaded (where it takes longer) memory
gives way sooner. People and agents ask seconds apart and state facts rarely: only a flood meets
the bound, and then memory gives way before forwarding does.

Shared by every store of the process (``MemoryRouter``) and the ask gate (``gate.py``), so a
flood of facts and a flood of asks draw on one budget instead of two.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

#: Seconds of work that may be spent back to back before the share applies (~80 asks).
BURST_SECONDS = 0.5


class CpuShare:
    """Thread-safe: asks take from it on the event loop, fact writers on worker threads."""

    def __init__(
        self,
        share: float = 1.0,
        *,
        cores: int | None = None,
        burst: float = BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = max(0.0, share) * (cores or os.cpu_count() or 1)
        self.burst = burst
        self._clock = clock
        self._credit = burst
        self._credit_at = clock()
        self._lock = threading.Lock()

    def available(self) -> bool:
        """Whether work may start now (some credit left after the refill since last asked)."""
        with self._lock:
            now = self._clock()
            self._credit = min(self.burst, self._credit + (now - self._credit_at) * self.rate)
            self._credit_at = now
            return self._credit > 1e-9  # float sums of charges: not > 0

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` of work done against the share."""
        with self._lock:
            self._credit -= max(0.0, seconds)
