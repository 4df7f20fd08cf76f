"""The savings recorder: outcomes accumulate in memory and are flushed every 25, and on a
timer (``ShapingStage`` flushes whatever is pending every ``MIN_FLUSH_INTERVAL`` seconds), so
the report never lags far behind the traffic and a ``kill -9`` loses at most that window.

Invariants:
- Writes are deltas merged into the stored documents in one write transaction each
  (``state.ShapingState.update``), so several proxies sharing ``$EMBER_HOME`` add up instead
  of overwriting each other.
- The baseline (the ``verbosity`` document) is re-read on every flush, before anything is
  written. ``ember learn --verbosity`` rewrites it; without the re-read a newly learned
  baseline would wait for a restart, and worse, a flush would write the stale in-memory
  baseline over the one just learned.
- A flush that fails keeps its delta for the next one, and its write is ``retried`` (not
  counted as a lost write: the outcomes are still here); ``unwritten`` says how many outcomes
  wait, which a stop that cannot write them counts as lost. Nothing is dropped silently.
- ``record*`` runs on the event loop and only touches memory; ``flush`` does the database
  work and is meant to run in a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.errors import StorageError, StorageUnavailable
from ember.shaping.savings import Ledger, Strata, strata_from_json, strata_to_json
from ember.shaping.state import ShapingState, learned_level
from ember.stats import RunningStats

log = logging.getLogger(__name__)

FLUSH_EVERY = 25
#: Under heavy traffic "every 25" would write many times a second; a flush is then
#: also held until this many seconds passed since the last one (nothing is lost meanwhile).
MIN_FLUSH_INTERVAL = 2.0


@dataclass(frozen=True)
class StoredState:
    """What shaping keeps, read in one go (for reports and the stage's start-up)."""

    ledger: Ledger
    baseline: Strata
    learned_level: int | None


def _day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def _verbosity(data: Any, where: str) -> tuple[dict[str, Any], Strata]:
    """A ``verbosity`` document and its parsed baseline; raises ``ValueError``."""
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object")
    return data, strata_from_json(data.get("baseline", {}))


def _ledger(data: Any) -> Ledger:
    return Ledger() if data is None else Ledger.from_json(data)


def read_state(state: ShapingState) -> StoredState:
    """Read-only view for ``ember output-savings``; raises ``ValueError`` naming what is bad."""
    raw, baseline = _verbosity(state.read("verbosity"), state.where("verbosity"))
    return StoredState(_ledger(state.read("ledger")), baseline, learned_level(raw))


class SavingsRecorder:
    def __init__(
        self,
        state: ShapingState,
        flush_every: int = FLUSH_EVERY,
        clock: Callable[[], float] = time.time,
        min_interval: float = MIN_FLUSH_INTERVAL,
    ) -> None:
        self.state = state
        self.flush_every = flush_every
        self.clock = clock
        self.min_interval = min_interval
        self._last_flush = float("-inf")
        self._mutex = threading.Lock()
        self._pending = Ledger()
        self._baseline_delta: Strata = {}
        self._count = 0
        #: outcomes in ``_pending`` and in ``_baseline_delta`` (what a lost flush would lose)
        self._pending_n = 0
        self._delta_n = 0
        self.baseline: Strata = {}
        self.learned_level: int | None = None
        #: the last ``reload`` could reach the store
        self.loaded = True
        self.reload()

    def reload(self) -> bool:
        """Re-read the baseline and learned level (what cannot be read is logged and
        ignored here). False when the store could not be reached (the storage said so
        itself: an info line here), to be read again later."""
        was, self.loaded = self.loaded, True
        try:
            raw, baseline = _verbosity(self.state.read("verbosity"), self.state.where("verbosity"))
        except StorageUnavailable as exc:
            level = logging.INFO if was else logging.DEBUG  # once, not at every retry
            log.log(level, "the verbosity state is read once the store is back: %s", exc)
            self.loaded = False
            return False
        except (ValueError, OSError, StorageError) as exc:
            log.warning("ignoring the verbosity state: %s", exc)
            return True
        self.baseline, self.learned_level = baseline, learned_level(raw)
        return True

    def baseline_mean(self, stratum: str) -> float | None:
        b = self.baseline.get(stratum)
        return b.mean if b is not None and b.n > 0 else None

    def record(self, arm: str, stratum: str, output_tokens: int, echo: float | None) -> bool:
        """One answered request while shaping is on; True when a flush is due."""
        mean = self.baseline_mean(stratum) if arm == "treatment" else None
        with self._mutex:
            self._pending.record(arm, stratum, output_tokens, echo, _day(self.clock()), mean)
            self._count += 1
            self._pending_n += 1
            return self._due()

    def record_baseline(self, stratum: str, output_tokens: int) -> bool:
        """One answered request that went out unshaped because shaping is off: it joins the
        baseline the estimated savings are measured against; True when a flush is due."""
        with self._mutex:
            self._baseline_delta.setdefault(stratum, RunningStats()).add(output_tokens)
            self._count += 1
            self._delta_n += 1
            return self._due()

    @property
    def pending(self) -> bool:
        """Outcomes recorded since the last flush."""
        with self._mutex:
            return self._count > 0

    @property
    def unwritten(self) -> int:
        """Outcomes recorded and not yet in the stored documents."""
        with self._mutex:
            return self._pending_n + self._delta_n

    def _due(self) -> bool:
        return (
            self._count >= self.flush_every and self.clock() - self._last_flush >= self.min_interval
        )

    def _take(self) -> tuple[Ledger, int, Strata, int]:
        with self._mutex:
            taken = self._pending, self._pending_n, self._baseline_delta, self._delta_n
            self._pending, self._baseline_delta, self._count = Ledger(), {}, 0
            self._pending_n = self._delta_n = 0
            return taken

    def _give_back(self, pending: Ledger, pending_n: int, delta: Strata, delta_n: int) -> None:
        """A failed flush's outcomes back into the pending ones; still ``pending``, so the
        stage's periodic flush tries them again even when no new outcome arrives."""
        with self._mutex:
            if not pending.empty or delta:
                self._count = max(self._count, 1)
            self._pending = pending.merged(self._pending)
            self._pending_n += pending_n
            self._delta_n += delta_n
            for k, v in delta.items():
                current = self._baseline_delta.get(k, RunningStats())
                self._baseline_delta[k] = v.merged(current)

    def flush(self) -> None:
        """Merge what was recorded since the last flush into the stored documents (blocking:
        run it in a worker thread). What a failed write held is given back, and only that."""
        pending, pending_n, delta, delta_n = self._take()
        self._last_flush = self.clock()
        if pending.empty and not delta:
            return
        try:
            self._flush_baseline(delta)
        except (OSError, StorageError):
            self._give_back(pending, pending_n, delta, delta_n)
            raise
        if pending.empty:
            return
        try:
            self.state.update("ledger", _adding(pending), retried=True)
        except (OSError, StorageError):
            self._give_back(pending, pending_n, {}, 0)
            raise

    def _flush_baseline(self, delta: Strata) -> None:
        """Add ``delta`` to the stored baseline and take in what is stored now (``ember
        learn --verbosity`` may have rewritten it meanwhile)."""
        if not delta:
            self.reload()
            return
        where = self.state.where("verbosity")
        doc = self.state.update(
            "verbosity", lambda stored: _with_delta(stored, delta, where), retried=True
        )
        raw, baseline = _verbosity(doc, where)
        self.baseline, self.learned_level = baseline, learned_level(raw)


def _with_delta(stored: Any, delta: Strata, where: str) -> dict[str, Any]:
    """The ``verbosity`` document with ``delta`` added to its baseline, every other key kept;
    a document that cannot be read starts afresh (logged)."""
    try:
        raw, baseline = _verbosity(stored, where)
    except ValueError as exc:
        log.warning("%s unreadable (%s); its baseline starts afresh", where, exc)
        raw, baseline = {}, {}
    for k, v in delta.items():
        baseline[k] = baseline[k].merged(v) if k in baseline else v
    return {**raw, "baseline": strata_to_json(baseline)}


def _adding(pending: Ledger) -> Callable[[Any], Any]:
    """The change that adds ``pending`` to a stored ledger document."""
    return lambda doc: _ledger_or_new(doc).merged(pending).to_json()


def _ledger_or_new(doc: Any) -> Ledger:
    """The stored ledger; a document that is not one starts afresh (logged)."""
    try:
        return _ledger(doc)
    except ValueError as exc:
        log.warning("the savings ledger was unreadable (%s); it starts afresh", exc)
        return Ledger()
