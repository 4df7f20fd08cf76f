"""What a database's owner counts of its writes: those committed, and those of its gaps.

- ``WriteStats``: jobs and batches committed, and how long a job waited from ``submit`` to its
  commit — the window a ``kill -9`` can lose — over the last jobs (``bench/storage_soak.py``).
  Its own lock: the writer thread records, any thread reads a summary.
- ``Tally``: the writes of the gaps (a gap: the time a file is switched off) — held now,
  written late, dropped by kind. It has no lock of its own: the owner changes it under the
  lock that guards the file's ``Health`` too, so a health with its counts is one snapshot
  (``onto``), never a state from one moment with counts from another.

Only counts: nothing here decides whether a write is held or dropped (``store.database``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from dataclasses import replace
from typing import Any

from ember.store.health import Health, kind_of
from ember.store.writer import Job


class Tally:
    """The counts of one owner's gaps (guarded by the owner's ``_state_lock``)."""

    def __init__(self) -> None:
        self.held = 0
        self.caught_up = 0
        self.dropped: Counter[str] = Counter()
        self.limit_hit = False
        #: answered requests of a killed proxy found without a row (``Health.lost_at_kill``)
        self.lost_at_kill = 0

    def new_gap(self) -> None:
        self.limit_hit = False

    def drop(self, jobs: list[Job[Any]]) -> None:
        self.dropped.update(kind_of(j.label) for j in jobs)

    def onto(self, health: Health) -> Health:
        return replace(
            health,
            held=self.held,
            caught_up=self.caught_up,
            dropped=sum(self.dropped.values()),
            dropped_by=tuple(sorted(self.dropped.items())),
            lost_at_kill=self.lost_at_kill,
        )


class WriteStats:
    """How the writer is doing: jobs and batches committed, and how long a job waited from
    ``submit`` to its commit (the window a ``kill -9`` can lose), over the last jobs."""

    def __init__(self, keep: int = 20000) -> None:
        self.jobs = 0
        self.batches = 0
        self._waits: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def record(self, batch: list[Job[Any]]) -> None:
        now = time.monotonic()
        with self._lock:
            self.jobs += len(batch)
            self.batches += 1
            self._waits.extend(now - job.queued_at for job in batch)

    def summary(self) -> dict[str, float]:
        with self._lock:
            waits = sorted(self._waits)
            jobs, batches = self.jobs, self.batches
        if not waits:
            return {"jobs": jobs, "batches": batches}

        def pick(q: float) -> float:
            return waits[min(len(waits) - 1, int(q * len(waits)))]

        return {
            "jobs": jobs,
            "batches": batches,
            "jobs_per_batch": jobs / max(batches, 1),
            "commit_wait_p50_ms": pick(0.5) * 1000,
            "commit_wait_p99_ms": pick(0.99) * 1000,
            "commit_wait_max_ms": waits[-1] * 1000,
        }
