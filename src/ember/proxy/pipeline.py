"""Running the stages around each exchange (the interface itself is ``ember.exchange``).

A stage sees every request before it goes upstream (``on_request``: read the request, edit it
through the adapter) and every outcome after the client has its answer (``on_response``:
record, learn, schedule work). Shaping, memory injection, shadow recording and accounting are all
stages; the HTTP handlers never change when a feature is added.

Fail open: a stage that raises is logged and skipped, and any edit it made before raising is
rolled back, so a bug in memory or shaping never breaks or corrupts the user's request. A stage
stopped by a switched-off database (``StorageUnavailable``) is skipped without a traceback: the
database reported its failure once (``ember.store.health``), and a line per request would bury
it; ``skipped`` counts those skips per stage.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from ember.errors import StorageUnavailable
from ember.exchange import Exchange, Outcome, Services, Stage, Stopping

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, stages: Sequence[Stage] = ()) -> None:
        self.stages = list(stages)
        #: stage name -> requests it skipped because its database is switched off
        self.skipped: Counter[str] = Counter()

    @property
    def http_only(self) -> str | None:
        """The first stage's reason to keep clients on HTTP (``Stage.http_only``), or None."""
        return next((s.http_only for s in self.stages if s.http_only), None)

    async def run_request(self, ex: Exchange) -> None:
        for stage in self.stages:
            if ex.refusal is not None:
                return  # ember answers it itself: nothing later may edit or search for it
            mark = ex.doc.checkpoint()
            try:
                await stage.on_request(ex)
            except StorageUnavailable:
                ex.doc.rollback(mark)
                self.skipped[stage.name] += 1
            except Exception:
                ex.doc.rollback(mark)
                log.exception("stage %s failed on request; request continues unchanged", stage.name)

    def answered(self, ex: Exchange) -> None:
        """Tell every stage the answer is complete (``Stage.on_answered``), once."""
        if ex.answered:
            return
        ex.answered = True
        for stage in self.stages:
            try:
                stage.on_answered(ex)
            except Exception:
                log.exception("stage %s failed on an answer's end", stage.name)

    async def run_response(self, ex: Exchange, outcome: Outcome) -> None:
        for stage in sorted(self.stages, key=lambda s: s.response_order):  # stable
            try:
                await stage.on_response(ex, outcome)
            except StorageUnavailable:
                self.skipped[stage.name] += 1
            except Exception:
                log.exception("stage %s failed on response", stage.name)

    async def start(self, services: Services) -> None:
        for stage in self.stages:
            try:
                await stage.start(services)
            except Exception:
                log.exception(
                    "stage %s failed to start; it stays in, and may do nothing", stage.name
                )

    async def settle(self) -> None:
        for stage in self.stages:
            try:
                await stage.settle()
            except Exception:
                log.exception("stage %s failed to settle", stage.name)

    async def wind_down(self, stopping: Stopping) -> None:
        for stage in self.stages:
            try:
                await stage.wind_down(stopping)
            except Exception:
                log.exception("stage %s failed to wind down", stage.name)

    async def close(self) -> None:
        """Stages close in reverse order: a later stage may still be writing through what an
        earlier one opened (traffic learning saves into the memory stage's stores)."""
        for stage in reversed(self.stages):
            try:
                await stage.close()
            except Exception:
                log.exception("stage %s failed to close", stage.name)
