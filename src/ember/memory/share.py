"""Memory's share of the machine: a token bucket of CPU seconds, one per proxy process.

Memory's work that no answer waits for on the spot — a new ask's search, the vectors of facts
a shadow or traffic learning has just found — may use at most ``share`` of the cores' time on
average (refilled at ``share x cores`` seconds per second, holding at most ``burst``). Work is
charged its wall time, so on a machine that is already loaded (where it takes longer) memory
gives way sooner. People and agents ask seconds apart and state facts rarely: only a flood meets
the bound, and then memory gives way before forwarding does.

Shared by every store of the process (``MemoryRouter``) and the ask gate (``gate.py``), so a
flood of facts and a flood of asks draw on one budget instead of two.

The proxy's budget refills only out of time the machine leaves idle (``MachineIdle``): at
``share x cores`` on an idle machine, down to ``IDLE_FLOOR`` of that on a saturated one. A fixed
tenth of the cores still cost 8 agents flooding a 2-core machine 0.17 of direct throughput
against memory off (0.72 against 0.89): the cores memory took were the agents'. Asks a person
or an agent waiting on a real model makes leave the machine idle, and get the whole share.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

#: Seconds of work that may be spent back to back before the share applies (~80 asks).
BURST_SECONDS = 0.5
#: The least of its share memory keeps on a machine with no idle time (a build, a flood of
#: agents): enough for a few searches a second, so asks spaced like a person's still search.
IDLE_FLOOR = 0.25
#: How often the machine's idle time is read again (``/proc/stat``: ~20 us a read).
IDLE_EVERY = 0.5
#: At most one log line this often about work that gave way (asks, fact vectors).
REPORT_EVERY = 60.0


def _cpu_times() -> tuple[float, float] | None:
    """(idle, total) CPU time of the machine so far, in clock ticks; None where unknown."""
    try:
        with open("/proc/stat", "rb") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    ticks = [float(x) for x in fields[1:9]]
    return ticks[3] + ticks[4], sum(ticks)


class MachineIdle:
    """The share of the machine's CPU time that was idle since the previous reading (at most
    every ``every`` seconds), in [0, 1]; 1 where the platform does not say (no /proc)."""

    def __init__(
        self,
        read: Callable[[], tuple[float, float] | None] = _cpu_times,
        clock: Callable[[], float] = time.monotonic,
        every: float = IDLE_EVERY,
    ) -> None:
        self._read, self._clock, self._every = read, clock, every
        self._last = read()
        self._at = clock()
        self._idle = 1.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            now = self._clock()
            if now - self._at < self._every:
                return self._idle
            sample = self._read()
            if sample is not None and self._last is not None:
                idle, total = sample[0] - self._last[0], sample[1] - self._last[1]
                if total > 0:
                    self._idle = min(1.0, max(0.0, idle / total))
            self._last, self._at = sample, now
            return self._idle


class Notice:
    """Counts what gave way to the share and says so in ``log``, once per ``every`` seconds
    at most, with the count since the last line: a flood must not become a flood of lines."""

    def __init__(
        self,
        log: logging.Logger,
        every: float = REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log, self._every, self._clock = log, every, clock
        self._unreported = 0
        self._reported_at: float | None = None

    def add(self, count: int, what: str) -> None:
        """``count`` more of ``what`` (logged as ``memory: <count> <what>``)."""
        self._unreported += count
        now = self._clock()
        if self._reported_at is None or now - self._reported_at >= self._every:
            self._log.warning("memory: %d %s", self._unreported, what)
            self._unreported, self._reported_at = 0, now


class CpuShare:
    """Thread-safe: asks take from it on the event loop, fact writers on worker threads."""

    def __init__(
        self,
        share: float = 1.0,
        *,
        cores: int | None = None,
        burst: float = BURST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        idle: Callable[[], float] | None = None,
    ) -> None:
        """``idle``: the machine's idle share (``MachineIdle``); None refills at the full
        rate whatever the machine does."""
        self.rate = max(0.0, share) * (cores or os.cpu_count() or 1)
        self._idle = idle
        self.burst = burst
        self._clock = clock
        self._credit = burst
        self._credit_at = clock()
        self._lock = threading.Lock()

    def available(self) -> bool:
        """Whether work may start now (some credit left after the refill since last asked)."""
        with self._lock:
            now = self._clock()
            rate = self.rate
            if self._idle is not None:
                rate *= IDLE_FLOOR + (1.0 - IDLE_FLOOR) * self._idle()
            self._credit = min(self.burst, self._credit + (now - self._credit_at) * rate)
            self._credit_at = now
            return self._credit > 1e-9  # float sums of charges: not > 0

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` of work done against the share."""
        with self._lock:
            self._credit -= max(0.0, seconds)
