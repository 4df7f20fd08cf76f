"""Batches whose COMMIT was lost with the connection, until the server says what became of
them: a batch is never written twice.

A connection that drops while a COMMIT is on the wire leaves the client not knowing whether
the batch committed. Holding it and writing it again — what a lost file write gets — would
duplicate each row whose key is not natural (an accounting row per request, a memory's
evidence). So the jobs of such a batch are kept here with their transaction id; before any
of them runs again, the server is asked (``pg_xact_status``): committed jobs are resolved
with the values they had, the others run again, and while the server cannot say yet (its
backend has not noticed the lost connection) none of them runs.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ember.store.pg.batch import CommitUnknown, settle
from ember.store.writer import FileFailure, Job, resolve, run_hook

if TYPE_CHECKING:
    import psycopg


class Unsure:
    """The jobs of batches whose outcome is unknown, by job (the same objects are held and
    handed back by the writer's queue, in whatever batches it makes of them)."""

    def __init__(self) -> None:
        self._by_job: dict[int, CommitUnknown] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_job)

    def remember(self, unknown: CommitUnknown) -> None:
        """Keep the held jobs of ``unknown`` (a waited one is failed at once by the gap and
        never comes back; kept, it would stay forever). The entry holds the jobs themselves,
        so no id is reused by another job while it is here."""
        with self._lock:
            for job, _, _ in unknown.results:
                if job.hold:
                    self._by_job[id(job)] = unknown

    def outstanding(self, conn: psycopg.Connection[Any], batch: list[Job[Any]]) -> list[Job[Any]]:
        """The jobs of ``batch`` still to run: those of a batch that committed are resolved
        as written and left out; those of one that did not are forgotten (they run again).
        Raises ``FileFailure`` (unreachable: held, asked again later) while the server
        cannot say."""
        with self._lock:
            asked = {id(u): u for j in batch if (u := self._by_job.get(id(j))) is not None}
        if not asked:
            return batch
        done: set[int] = set()
        for unknown in asked.values():
            outcome = settle(conn, unknown)
            if outcome is None:
                raise FileFailure("unreachable", unknown.cause)
            self.forget(unknown, committed=outcome)
            if outcome:
                done.update(id(job) for job, _, _ in unknown.results)
        return [j for j in batch if id(j) not in done]

    def forget(self, unknown: CommitUnknown, *, committed: bool) -> None:
        """Settle ``unknown``: resolve its jobs as written, or run their rollback hooks."""
        with self._lock:
            for job, _, _ in unknown.results:
                self._by_job.pop(id(job), None)
        if committed:
            resolve(unknown.results)
            return
        for job, _, _ in unknown.results:
            run_hook(job.on_rollback, job)
