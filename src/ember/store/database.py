"""``Database``: the one owner of one SQLite file in this process.

Everything that touches a database file goes through its owner: accounting rows, the
injection ledger, memory, and every feature after them. The owner holds
- one writer thread with the only write connection (``writerloop.py``: it opens, checks and
  closes the file; ``writer.py``: batched transactions);
- a small pool of read-only connections, used from worker threads (``readers.py``; WAL:
  readers never wait for the writer and never block it);
- the file's health: a file-level failure switches the database off for this process,
  reported once, while requests keep flowing (``health.py``).

Nothing here blocks an event loop: ``submit`` only enqueues (async callers await
``awrite``/``aread``, which run in threads); opening, migrating and closing happen on the
writer thread. No thread lock is ever held across I/O by a caller on the event loop — the
locks here guard a few fields and are released before any SQLite call. ``_state_lock`` guards
the file's ``_health`` and the gap's ``_tally`` together: a health and its counts are read as
one snapshot. Lock order: the queue's condition, then ``_state_lock``; never the other way
round.

The gap — writes submitted while the file is switched off. Which are held and which dropped is
decided here; when the writer tries the file again, in ``writerloop.py``:
- A transient failure (disk full, unwritable, I/O error, locked for long) keeps the writer
  thread alive: it holds the refused batch and every write submitted meanwhile (``hold``: a
  process-wide ``HoldLimit``), retries at a backoff (``health.retry_delay``) and writes them
  once the file takes writes again — the rows of a full disk's minutes are not lost.
- A write whose caller waits for it (``write``/``awrite``) is failed at once instead: a
  request's stage must not hang on a full disk. Past the hold limit, on a corrupt file, and at
  shutdown while the file is still off, writes are dropped — counted, by kind, in ``health``
  (``writestats.Tally``).

Damage is looked for, not only waited for, and a damaged file is quarantined so that
``ember doctor --recover`` finds it as it was at its last good commit (``writerloop.py``).
While the file is open the owner holds a shared lock on ``<file>.lock``, so the doctor can
tell that a proxy still has it open (``fileguard.in_use``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ember.errors import StorageError, StorageUnavailable
from ember.store import writer as w
from ember.store.driver import Connection, errors
from ember.store.fileguard import WAL_READ_BYTES, in_use, lock_path
from ember.store.health import TRANSIENT, Health, State, classify
from ember.store.hold import HoldLimit
from ember.store.migrations import Schema
from ember.store.readers import IDLE_READERS, Readers
from ember.store.sql import Dialect
from ember.store.writerloop import WAL_CHECK_BYTES, WriterLoop
from ember.store.writestats import Tally, WriteStats

# What callers import from the owner's module; each is defined, and read, in its own module.
__all__ = [
    "CHECK_SECONDS",
    "IDLE_READERS",
    "IDLE_SECONDS",
    "WAL_CHECK_BYTES",
    "WAL_READ_BYTES",
    "Database",
    "ProblemHook",
    "WriteStats",
    "in_use",
    "lock_path",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A writer with nothing to do for this long closes its connection (reopened on demand).
IDLE_SECONDS = 300.0
#: While the writer writes, the file is checked (``PRAGMA quick_check``) this often at most:
#: a few hundred milliseconds of reading per check on a large file, once a minute (sooner
#: once the WAL grew by ``WAL_CHECK_BYTES``).
CHECK_SECONDS = 60.0

ProblemHook = Callable[[Health], None]


class Database(WriterLoop):
    def __init__(
        self,
        path: Path,
        schema: Schema,
        *,
        vec: bool = False,
        on_problem: ProblemHook | None = None,
        idle_seconds: float = IDLE_SECONDS,
        log_failures: bool = True,
        hold: HoldLimit | None = None,
        check_seconds: float | None = None,
    ) -> None:
        """``log_failures=False`` for a short-lived owner (a CLI command): the error it raises
        already says everything, and a second line from the log would only repeat it.
        ``hold``: the budget of writes kept through a gap (None: none are, a write the file
        refuses fails at once — a CLI command has nobody to write them later).
        ``check_seconds``: how often the file is checked while written (``CHECK_SECONDS``).

        The schema is resolved here, in the caller: one that cannot be built (the features
        not installed: ``ember.installed.NotInstalled``) is the caller's error, raised to it,
        never a file switched off as "unwritable" by the writer thread."""
        _ = schema.migrations
        super().__init__(
            path,
            schema,
            vec=vec,
            idle_seconds=idle_seconds,
            check_seconds=CHECK_SECONDS if check_seconds is None else check_seconds,
            log_failures=log_failures,
        )
        self._on_problem = on_problem
        self._hold = hold
        self._state_lock = threading.Lock()
        self._health = Health(self.where)
        self._tally = Tally()
        self._readers = Readers(
            path,
            vec=lambda: self.vec and self.vec_problem is None,
            keep=lambda: not self._closed and self.open,
        )
        self.last_used = time.monotonic()

    # -- health -----------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The database as its health, its log lines and its errors name it: the file."""
        return str(self.path)

    @property
    def health(self) -> Health:
        """The file's standing with this owner's counts (held, written late, dropped)."""
        with self._state_lock:
            return self._tally.onto(self._health)

    @property
    def dialect(self) -> Dialect:
        """Which SQL this database speaks (``sql.dialect`` of its connections): a feature
        picks its SQLite or PostgreSQL part by asking, never by the owner's class."""
        return "sqlite"

    @property
    def durable_hold(self) -> bool:
        """Whether writes held through a gap outlive this process (a PostgreSQL store's
        write journal, ``store.pg.held``): a SQLite file's are in memory only."""
        return False

    @property
    def open(self) -> bool:
        """The writer thread is running (the file is open)."""
        writer = self._writer
        return writer is not None and writer.is_alive()

    def _unavailable(self) -> StorageUnavailable:
        return StorageUnavailable(self._health.describe())

    def _fail(self, state: State, cause: BaseException) -> None:
        """Switch the database off (``state``); one line per change of state, not per write
        or retry. Wakes the writer, which quarantines a corrupt file."""
        with self._state_lock:
            before = self._health
            first = before.ok or before.state != state
            if first:
                self._health = Health(self.where, state, str(cause), time.time())
                self._tally.new_gap()
            else:
                self._health = replace(before, detail=str(cause))
        with self._queue.cond:
            self._queue.cond.notify_all()
        if not first:
            return
        if self._log_failures:
            self._say_off(state, cause)
        self._report()

    def _say_off(self, state: State, cause: BaseException) -> None:
        """The one line of a switch-off (a PostgreSQL schema says it per server instead)."""
        log.error(
            "database %s switched off (%s: %s); %s; requests go on without its features. Fix: %s",
            self.where,
            state,
            cause,
            self._gap_policy(state),
            self._health.fix(self.where),
        )

    def found_damaged(self, cause: BaseException) -> None:
        """A check from outside the writer found the file damaged (``startcheck``): switched
        off as if a write had met the damage — said once, never written again."""
        self._fail("corrupt", cause)

    def _gap_policy(self, state: State) -> str:
        if state not in TRANSIENT:
            return "its writes are dropped and counted, and the file is left as it is"
        if self._hold is None or self._hold.limit == 0:
            return "its writes are dropped and counted until the file is back"
        return (
            f"its writes are held in memory (up to {self._hold.limit} in all) and written "
            "when the file is back"
        )

    def _recovered(self) -> None:
        """A write committed after a transient failure: the file is back (never clears
        ``corrupt``). One line, with what the gap cost."""
        with self._state_lock:
            before = self._health
            if before.ok or before.state not in TRANSIENT:
                return
            self._health = Health(self.where, was=before.state)
            tally = self._tally.onto(before)
        if self._log_failures:
            self._say_back(before, tally)
        self._report()

    def _say_back(self, before: Health, tally: Health) -> None:
        """The one line of a return (a PostgreSQL schema says it per server instead)."""
        log.warning(
            "database %s is back after %.0fs (was %s): %d held writes "
            "written, %d dropped since it was first switched off",
            self.where,
            time.time() - before.since,
            before.state,
            tally.caught_up,
            tally.dropped,
        )

    def _report(self) -> None:
        if self._on_problem is not None:
            with contextlib.suppress(Exception):
                self._on_problem(self.health)

    # -- writes -----------------------------------------------------------------------------

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
        """Queue a write; the future resolves once it is committed (or failed). Never blocks.

        While the file is off for a transient reason the write is held until it is back
        (``hold=False``: failed at once, for a caller that waits), unless the hold limit is
        reached: then it fails with ``StorageUnavailable`` and is counted as dropped.
        ``retried``: the caller keeps what the write carries and tries again later (a periodic
        flush), so a refusal is not counted as dropped — counted, each retry of one flush
        showed up as one more lost write; the caller counts what it gives up (``lost``)."""
        job: w.Job[T] = w.Job(fn, exclusive, on_commit, on_rollback, label, hold, retried=retried)
        with self._queue.cond:
            if self._closed:
                job.future.set_exception(StorageError(f"{self.where} is closed"))
                return job.future
            if not self._admit(job):
                refused = True
            else:
                refused = False
                self._queue.put(job)
                if self._writer is None:
                    self._start_writer()
        if refused:
            self._drop([job])
        self.last_used = time.monotonic()
        return job.future

    def _admit(self, job: w.Job[Any]) -> bool:
        """Whether ``job`` may be queued now. Caller holds the queue's condition."""
        state = self._health.state
        if state == "ok":
            return True
        if state not in TRANSIENT:
            return False  # corrupt: stays off until ``ember doctor`` and a restart
        if self._reserve(job):
            return True
        # Not held: it may still try the file, once the retry is due and nothing else is.
        return self._writer is None and time.monotonic() >= self._retry_at

    def _reserve(self, job: w.Job[Any]) -> bool:
        """Count ``job`` as held (it takes room in the hold limit); False for a job whose
        caller waits (``hold=False``: it must be told now, not when the disk is freed) and
        past the limit."""
        if not job.hold:
            return False
        if job.reserved:
            return True
        if self._hold is None or not self._hold.take():
            self._warn_limit()
            return False
        job.reserved = True
        with self._state_lock:
            self._tally.held += 1
        return True

    def _warn_limit(self) -> None:
        with self._state_lock:
            first = not self._tally.limit_hit
            self._tally.limit_hit = True
        if first and self._hold is not None and self._hold.limit and self._log_failures:
            log.warning(
                "database %s: the hold limit (%d writes, all databases together) is reached;"
                " further writes are dropped and counted until the file is back",
                self.where,
                self._hold.limit,
            )

    def _release(self, jobs: list[w.Job[Any]], *, written: bool) -> None:
        """``jobs`` left the gap: written (counted as caught up) or dropped."""
        held = [j for j in jobs if j.reserved]
        if not held:
            return
        for job in held:
            job.reserved = False
        if self._hold is not None:
            self._hold.give(len(held))
        with self._state_lock:
            self._tally.held -= len(held)
            if written:  # a job that failed on a statement of its own was not written
                self._tally.caught_up += sum(_succeeded(j.future) for j in held)

    def _drop(self, jobs: list[w.Job[Any]]) -> None:
        """Fail ``jobs`` with ``StorageUnavailable`` and count them as dropped, by kind."""
        jobs = [j for j in jobs if not j.future.done()]
        if not jobs:
            return
        self._release(jobs, written=False)
        with self._state_lock:
            # flush/open carry no data; a retried write's data is still with its caller
            self._tally.drop([j for j in jobs if j.fn is not _noop and not j.retried])
        err = self._unavailable()
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(err)

    def _give_up(self) -> None:
        """Closing while the file is still off: the held writes cannot be kept any longer."""
        with self._queue.cond:
            jobs = self._queue.drain()
        if not jobs:
            return
        self._drop(jobs)
        if self._log_failures:
            log.error(
                "database %s is still switched off (%s) at shutdown: %d held writes are "
                "dropped (counted in %s)",
                self.where,
                self._health.state,
                len(jobs),
                "storage-problems.json" if self._on_problem else "its health",
            )
        self._report()

    def lost(self, kind: str, n: int) -> None:
        """Count ``n`` writes of ``kind`` as dropped: a caller that kept them through refused
        ``retried`` writes gives them up (a stop while the file is still off)."""
        if n <= 0:
            return
        with self._state_lock:
            self._tally.dropped[kind] += n
        self._report()

    def note_lost_at_kill(self, n: int) -> None:
        """``n`` answered requests of a proxy killed earlier have no accounting row here
        (``store.journal``): reported with the file's health until the process stops."""
        if n <= 0:
            return
        with self._state_lock:
            self._tally.lost_at_kill += n
        self._report()

    def write(self, fn: Callable[[Connection], T], **kw: Any) -> T:
        """``submit`` and wait (worker threads and the CLI only, never the writer itself).
        Never held through a gap: the caller waits, it is told at once."""
        if threading.current_thread() is self._writer:
            raise RuntimeError("Database.write() called from inside a write job (deadlock)")
        return self.submit(fn, hold=False, **kw).result()

    async def awrite(self, fn: Callable[[Connection], T], **kw: Any) -> T:
        """``submit`` and await; never held through a gap (see ``write``)."""
        return await asyncio.wrap_future(self.submit(fn, hold=False, **kw))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is committed; False on timeout, and at once
        while writes are held for a file that is off (they wait for the file, not for us)."""
        with self._queue.cond:
            if self._writer is None and len(self._queue) == 0:
                return True
            if not self._health.ok:
                return self._settled()
        done = self.submit(_noop, label="flush", hold=False)  # FIFO: after everything before
        try:
            done.result(timeout)
        except StorageError:
            return self._settled()  # switched off meanwhile
        except TimeoutError:
            return False
        return True

    def _settled(self) -> bool:
        """Nothing queued, running or held."""
        return len(self._queue) == 0 and not self._busy and self._tally.held == 0

    # -- reads ------------------------------------------------------------------------------

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read-only connection in one read transaction (a consistent
        snapshot). Blocking: worker threads and the CLI; async code uses ``aread``."""
        self._ensure_migrated()
        conn = self._readers.take()
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")
        except errors.Error as exc:
            state = classify(exc)
            if state is None or state == "busy":
                raise
            if state == "corrupt":
                self._fail(state, exc)
            raise StorageUnavailable(Health(self.where, state, str(exc)).describe()) from exc
        finally:
            self._readers.give_back(conn)

    async def aread(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self.read, fn)

    def _ensure_migrated(self) -> None:
        if self._health.state == "corrupt":
            raise self._unavailable()
        if not self._migrated.is_set():
            self.submit(_noop, label="open", hold=False).result()

    def _close_readers(self) -> None:
        self._readers.close()

    def data_version(self) -> int:
        """A number that changes whenever any connection commits to the file — another
        process included (``PRAGMA data_version`` of one dedicated connection)."""
        self._ensure_migrated()
        return self._readers.data_version()

    # -- lifecycle --------------------------------------------------------------------------

    def idle(self) -> bool:
        return not self._busy and len(self._queue) == 0

    def suspend(self) -> None:
        """Close the file if nothing is queued (reopened by the next use). Never blocks: the
        writer thread wakes up with nothing to do, closes its connections and ends."""
        with self._queue.cond:
            if self._writer is not None and len(self._queue) == 0 and not self._busy:
                self._suspend = True
                self._queue.cond.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued, then close (blocking: shutdown and the CLI). Writes held
        for a file that is off get one last try, then are dropped and counted."""
        with self._queue.cond:
            self._closed = True
            writer = self._writer
            self._queue.cond.notify_all()
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout)
            if writer.is_alive():
                log.error("database %s: writes still pending after %.0fs", self.where, timeout)
        self._close_readers()
        if self.health.reportable:
            self._report()  # the final counts, for whoever looks next (``ember stats``)
        if self._guard is not None and not self.open:
            with contextlib.suppress(errors.Error):
                self._guard.close()  # read-only: the last close of the process, no checkpoint
            self._guard = None

    def reopen(self) -> None:
        """Allow use again after ``close`` (tests, doctor)."""
        with self._queue.cond:
            self._closed = False


def _noop(conn: Connection) -> None:
    return None


def _succeeded(future: Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None
