"""The writes of a PostgreSQL schema, held on disk through an outage and a restart.

``HeldWrites`` is the half of ``PgDatabase`` that decides what becomes of a write while the
server may not have it yet; the other half talks to the server. A write that can be written
down (``store.ops.Op``, submitted to be held) goes into the process's write journal
(``store.pg.journal``) when it is submitted, and is noted as done there once committed:

- Through an outage it is held without counting against the in-memory hold limit
  (``storage_hold_writes``): the journal's own bound (``storage_journal_mb``) limits it. A
  write the journal refuses (full, or its disk failing) is held in memory like any other
  write, up to that limit, and said once.
- At a stop while the server is still down, it is neither dropped nor counted as lost: it
  stays in the journal and the next start on this ``EMBER_HOME`` delivers it
  (``store.pg.deliver``). A write with no journal entry is dropped and counted, as before.
- A write dropped for good (a caller's own refusal, a closed database) is noted as done too:
  counted once, by the database's health, never delivered by a later start as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from ember.store import writer as w
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.ops import Op
from ember.store.pg.journal import WriteJournal

log = logging.getLogger("ember.store.database")

T = TypeVar("T")

JournalSource = Callable[[], WriteJournal | None]


def ticket_of(job: w.Job[Any]) -> Any:
    """The journal's ticket of ``job`` (None: not journaled)."""
    fn = job.fn
    return fn.ticket if isinstance(fn, Op) else None


class HeldWrites(Database):
    """A ``Database`` whose ``Op`` writes are journaled (``journal``: the process's write
    journal, made on first use; None or returning None: nothing is journaled)."""

    _journal_of: JournalSource | None = None

    @property
    def journal(self) -> WriteJournal | None:
        source = self._journal_of
        return source() if source is not None else None

    @property
    def durable_hold(self) -> bool:
        return self.journal is not None

    def submit(
        self,
        fn: Callable[[Connection], T],
        *,
        exclusive: bool = False,
        on_commit: Callable[[], None] | None = None,
        on_rollback: Callable[[], None] | None = None,
        label: str = "",
        hold: bool = True,
        retried: bool = False,
    ) -> Future[T]:
        """``Database.submit``, with an ``Op`` that is to be held journaled first."""
        if isinstance(fn, Op) and hold and fn.ticket is None:
            journal = self.journal
            if journal is not None and self._journaled(journal, fn, label) is None:
                self._journal_refused(journal)
        return super().submit(
            fn,
            exclusive=exclusive,
            on_commit=on_commit,
            on_rollback=on_rollback,
            label=label,
            hold=hold,
            retried=retried,
        )

    def _journaled(self, journal: WriteJournal, op: Op, label: str) -> Any:
        return journal.append(op, self.path, self.schema.name, label)

    def _journal_refused(self, journal: WriteJournal) -> None:
        refused = journal.refused
        if refused.said or not self._log_failures:
            return
        refused.said = True
        log.warning(
            "the write journal in %s takes no more writes (%s; storage_journal_mb): writes "
            "for %s are held in memory only (up to %d) until it has room, and lost if the "
            "proxy stops before the server takes them",
            journal.directory,
            refused.cause,
            self.where,
            self._hold.limit if self._hold is not None else 0,
        )

    # -- the gap ----------------------------------------------------------------------------

    def _reserve(self, job: w.Job[Any]) -> bool:
        """A journaled write is held whatever the in-memory limit: the journal bounds it."""
        if ticket_of(job) is None or not job.hold:
            return super()._reserve(job)
        if not job.reserved:
            job.reserved = True
            with self._state_lock:
                self._tally.held += 1
        return True

    def _release(self, jobs: list[w.Job[Any]], *, written: bool) -> None:
        journaled = [j for j in jobs if j.reserved and ticket_of(j) is not None]
        if not journaled:
            super()._release(jobs, written=written)
            return
        super()._release([j for j in jobs if ticket_of(j) is None], written=written)
        for job in journaled:
            job.reserved = False
        with self._state_lock:
            self._tally.held -= len(journaled)
            if written:
                self._tally.caught_up += sum(_succeeded(j.future) for j in journaled)

    def _drop(self, jobs: list[w.Job[Any]]) -> None:
        """Dropped and counted: never delivered by a later start too."""
        gone = [j for j in jobs if not j.future.done()]
        super()._drop(jobs)
        self._note_done(gone)

    def _give_up(self) -> None:
        """Closing while the server is down: journaled writes stay in the journal for the next
        start (neither dropped nor counted); the others are dropped and counted."""
        with self._queue.cond:
            jobs = self._queue.drain()
        kept = [j for j in jobs if ticket_of(j) is not None]
        with self._state_lock:
            self._tally.held -= sum(1 for j in kept if j.reserved)
        for job in kept:
            job.reserved = False
        self.kept_at_stop += len(kept)
        dropped = [j for j in jobs if ticket_of(j) is None]
        if dropped:
            self._drop(dropped)
            if self._log_failures:
                log.error(
                    "database %s is still switched off (%s) at shutdown: %d held writes that "
                    "could not be journaled are dropped (counted in storage-problems.json)",
                    self.where,
                    self._health.state,
                    len(dropped),
                )
        self._report()

    #: writes left in the journal at a stop while the server was down
    kept_at_stop = 0

    def _note_done(self, jobs: list[w.Job[Any]]) -> None:
        """The journal's note that ``jobs`` are done with (committed, failed, or dropped)."""
        tickets = []
        for job in jobs:
            fn = job.fn
            if isinstance(fn, Op) and fn.ticket is not None:
                tickets.append(fn.ticket)
                fn.ticket = None
        journal = self.journal if tickets else None
        if journal is not None:
            journal.done(tickets)


def _succeeded(future: Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None
