"""The savings recorder: outcomes accumulate in memory and are flushed every 25, and on a
timer (``ShapingStage`` flushes whatever is pending every ``MIN_FLUSH_INTERVAL`` seconds), so
the report never lags far behind the traffic and a ``kill -9`` loses at most that window.

Invariants:
- Writes are deltas merged into the file under the shaping lock (read, merge, write), so
  several proxies sharing ``$EMBER_HOME`` add up instead of overwriting each other.
- The baseline file (``verbosity.json``) is re-read on every flush, before anything is written.
  ``ember learn --verbosity`` rewrites that file in place; without the re-read a newly learned
  baseline would wait for a restart, and worse, a flush would write the stale in-memory
  baseline over the one just learned.
- A flush that fails keeps its delta for the next one; nothing recorded is dropped silently.
- ``record*`` runs on the event loop and only touches memory; ``flush`` does the file work and
  is meant to run in a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.shaping.files import ShapingFiles, learned_level, read_json, set_aside, write_json
from ember.shaping.savings import Ledger, Strata, strata_from_json, strata_to_json
from ember.stats import RunningStats

log = logging.getLogger(__name__)

FLUSH_EVERY = 25
#: Under heavy traffic "every 25" would rewrite the files many times a second; a flush is then
#: also held until this many seconds passed since the last one (nothing is lost meanwhile).
MIN_FLUSH_INTERVAL = 2.0


@dataclass(frozen=True)
class StoredState:
    """What the shaping files hold, read in one go (for reports and the stage's start-up)."""

    ledger: Ledger
    baseline: Strata
    learned_level: int | None


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def _read_verbosity(files: ShapingFiles) -> tuple[dict[str, Any], Strata]:
    """The raw ``verbosity.json`` object and its parsed baseline; raises ``ValueError``."""
    data = read_json(files.verbosity)
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ValueError(f"{files.verbosity}: expected a JSON object")
    return data, strata_from_json(data.get("baseline", {}))


def _read_ledger(files: ShapingFiles) -> Ledger:
    data = read_json(files.ledger)
    return Ledger() if data is None else Ledger.from_json(data)


def read_state(files: ShapingFiles) -> StoredState:
    """Read-only view for ``ember output-savings``; raises ``ValueError`` naming a bad file."""
    raw, baseline = _read_verbosity(files)
    return StoredState(_read_ledger(files), baseline, learned_level(raw))


class SavingsRecorder:
    def __init__(
        self,
        files: ShapingFiles,
        flush_every: int = FLUSH_EVERY,
        clock: Callable[[], float] = time.time,
        min_interval: float = MIN_FLUSH_INTERVAL,
    ) -> None:
        self.files = files
        self.flush_every = flush_every
        self.clock = clock
        self.min_interval = min_interval
        self._last_flush = float("-inf")
        self._mutex = threading.Lock()
        self._pending = Ledger()
        self._baseline_delta: Strata = {}
        self._count = 0
        self.baseline: Strata = {}
        self.learned_level: int | None = None
        self.reload()

    def reload(self) -> None:
        """Re-read the baseline and learned level (a bad file is logged and ignored here;
        it is only set aside when this recorder has something to write into it)."""
        try:
            raw, baseline = _read_verbosity(self.files)
        except (ValueError, OSError) as exc:
            log.warning("ignoring %s: %s", self.files.verbosity, exc)
            return
        self.baseline, self.learned_level = baseline, learned_level(raw)

    def baseline_mean(self, stratum: str) -> float | None:
        b = self.baseline.get(stratum)
        return b.mean if b is not None and b.n > 0 else None

    def record(self, arm: str, stratum: str, output_tokens: int, echo: float | None) -> bool:
        """One answered request while shaping is on; True when a flush is due."""
        mean = self.baseline_mean(stratum) if arm == "treatment" else None
        with self._mutex:
            self._pending.record(arm, stratum, output_tokens, echo, _day(self.clock()), mean)
            self._count += 1
            return self._due()

    def record_baseline(self, stratum: str, output_tokens: int) -> bool:
        """One answered request that went out unshaped because shaping is off: it joins the
        baseline the estimated savings are measured against; True when a flush is due."""
        with self._mutex:
            self._baseline_delta.setdefault(stratum, RunningStats()).add(output_tokens)
            self._count += 1
            return self._due()

    @property
    def pending(self) -> bool:
        """Outcomes recorded since the last flush."""
        with self._mutex:
            return self._count > 0

    def _due(self) -> bool:
        return (
            self._count >= self.flush_every and self.clock() - self._last_flush >= self.min_interval
        )

    def _take(self) -> tuple[Ledger, Strata]:
        with self._mutex:
            pending, delta = self._pending, self._baseline_delta
            self._pending, self._baseline_delta, self._count = Ledger(), {}, 0
            return pending, delta

    def _give_back(self, pending: Ledger, delta: Strata) -> None:
        with self._mutex:
            self._pending = pending.merged(self._pending)
            for k, v in delta.items():
                current = self._baseline_delta.get(k, RunningStats())
                self._baseline_delta[k] = v.merged(current)

    def flush(self) -> None:
        """Merge what was recorded since the last flush into the files (blocking I/O)."""
        pending, delta = self._take()
        self._last_flush = self.clock()
        if pending.empty and not delta:
            return
        try:
            with self.files.locked():
                self._flush_baseline(delta)
                if not pending.empty:
                    self._flush_ledger(pending)
        except OSError:
            self._give_back(pending, delta)
            raise

    def _flush_baseline(self, delta: Strata) -> None:
        try:
            raw, baseline = _read_verbosity(self.files)
        except ValueError as exc:
            if not delta:
                log.warning("ignoring %s: %s", self.files.verbosity, exc)
                return
            set_aside(self.files.verbosity, str(exc))
            raw, baseline = {}, {}
        if delta:
            for k, v in delta.items():
                baseline[k] = baseline[k].merged(v) if k in baseline else v
            write_json(self.files.verbosity, {**raw, "baseline": strata_to_json(baseline)})
        self.baseline, self.learned_level = baseline, learned_level(raw)

    def _flush_ledger(self, pending: Ledger) -> None:
        try:
            stored = _read_ledger(self.files)
        except ValueError as exc:
            set_aside(self.files.ledger, str(exc))
            stored = Ledger()
        write_json(self.files.ledger, stored.merged(pending).to_json())
