"""``Database``: the one owner of one SQLite file in this process.

Everything that touches a database file goes through its owner: accounting rows, the
injection ledger, memory, and every feature after them. The owner holds
- one writer thread with the only write connection (``writer.py``: batched transactions);
- a small pool of read-only connections, used from worker threads (WAL: readers never wait
  for the writer and never block it);
- the file's health: a file-level failure switches the database off for this process,
  reported once, while requests keep flowing (``health.py``).

Nothing here blocks an event loop: ``submit`` only enqueues (async callers await
``awrite``/``aread``, which run in threads); opening, migrating and closing happen on the
writer thread. No thread lock is ever held across I/O by a caller on the event loop — the
locks here guard a few fields and are released before any SQLite call. Lock order: the
queue's condition, then ``_state_lock``; never the other way round.

The gap — writes submitted while the file is switched off:
- A transient failure (disk full, unwritable, I/O error, locked for long) keeps the writer
  thread alive: it holds the refused batch and every write submitted meanwhile (``hold``: a
  process-wide ``HoldLimit``), retries at a backoff (``health.retry_delay``) and writes them
  once the file takes writes again — the rows of a full disk's minutes are not lost.
- A write whose caller waits for it (``write``/``awrite``) is failed at once instead: a
  request's stage must not hang on a full disk. Past the hold limit, on a corrupt file, and at
  shutdown while the file is still off, writes are dropped — counted, by kind, in ``health``.

Damage is looked for, not only waited for: the writer runs ``PRAGMA quick_check`` on a fresh
connection (the writer's own page cache would hide what changed on disk) when it first opens
the file, every ``check_seconds`` while it writes, and before it closes the file. Automatic
checkpoints are off on the writer: the WAL's frames reach the main file only after a check
passed. A file found damaged is *quarantined*: no connection of this process writes to it or
checkpoints it again (``driver.guard``), so a damaged WAL is not copied over the main file and
``ember doctor --recover`` finds the file as it was at its last good commit.

The owner also holds a shared ``flock`` on ``<file>.lock`` while the file is open, so
``ember doctor --recover`` can tell that a proxy still has it open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ember.errors import StorageError, StorageUnavailable
from ember.store import writer as w
from ember.store.driver import Connection, connect, errors, guard
from ember.store.health import (
    RETRY_AFTER_SECONDS,
    TRANSIENT,
    Health,
    State,
    classify,
    kind_of,
    retry_delay,
)
from ember.store.hold import HoldLimit
from ember.store.migrations import Schema, migrate
from ember.store.pages import read_wal

try:  # POSIX; elsewhere the owner lock is skipped (doctor then cannot tell)
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Read connections kept open per database (more are opened under load, then closed).
IDLE_READERS = 4
#: A writer with nothing to do for this long closes its connection (reopened on demand).
IDLE_SECONDS = 300.0
#: While the writer writes, the file is checked (``PRAGMA quick_check``) this often at most:
#: a few hundred milliseconds of reading per check on a large file, once a minute.
CHECK_SECONDS = 60.0
#: ... and sooner once the WAL holds this much: its frames reach the main file only after a
#: check, so the check also bounds how long the WAL grows.
WAL_CHECK_BYTES = 16 * 1024 * 1024
#: A WAL left behind by a stopped process is read frame by frame at the first open when it is
#: no larger than this (about a second of checksums; a larger one is left to SQLite's own
#: recovery). The writer keeps its WAL below ``WAL_CHECK_BYTES``, so one it left always is.
WAL_READ_BYTES = 24 * 1024 * 1024

ProblemHook = Callable[[Health], None]


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class Database:
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
        ``check_seconds``: how often the file is checked while written (``CHECK_SECONDS``)."""
        self.path = path
        self._log_failures = log_failures
        self.schema = schema
        self.vec = vec
        self._on_problem = on_problem
        self._idle_seconds = idle_seconds
        self._hold = hold
        self._check_seconds = CHECK_SECONDS if check_seconds is None else check_seconds
        self._queue = w.JobQueue()
        self._writer: threading.Thread | None = None
        self._busy = False  # the writer is running a batch
        self._closed = False
        self._suspend = False
        self._migrated = threading.Event()
        self._state_lock = threading.Lock()
        self._health = Health(str(path))
        self._tally = _Tally()
        self._retries = 0  # failed retries of the current gap (the backoff's exponent)
        self._retry_at = 0.0  # monotonic: when the next write may try a file that is off
        self._checked = False  # the file was checked since this owner opened it
        self._checked_at = time.monotonic()
        self._unchecked = False  # writes committed since the last check
        self._check_now = False
        self._wal_mark = 0  # the WAL's size at the last check (``_wal_grew``)
        self._guard: Connection | None = None
        self._readers: list[Connection] = []
        self._observer: Connection | None = None
        self._observer_lock = threading.Lock()
        self.vec_problem: str | None = None
        self.last_used = time.monotonic()
        self.stats = WriteStats()

    # -- health -----------------------------------------------------------------------------

    @property
    def health(self) -> Health:
        """The file's standing with this owner's counts (held, written late, dropped)."""
        with self._state_lock:
            return self._tally.onto(self._health)

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
                self._health = Health(str(self.path), state, str(cause), time.time())
                self._tally.new_gap()
            else:
                self._health = replace(before, detail=str(cause))
        with self._queue.cond:
            self._queue.cond.notify_all()
        if not first:
            return
        if self._log_failures:
            log.error(
                "database %s switched off (%s: %s); %s; requests go on without its features."
                " Fix: %s",
                self.path,
                state,
                cause,
                self._gap_policy(state),
                self._health.fix(str(self.path)),
            )
        self._report()

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
            self._health = Health(str(self.path), was=before.state)
            tally = self._tally.onto(before)
        if self._log_failures:
            log.warning(
                "database %s is back after %.0fs (was %s): %d held writes "
                "written, %d dropped since it was first switched off",
                self.path,
                time.time() - before.since,
                before.state,
                tally.caught_up,
                tally.dropped,
            )
        self._report()

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
    ) -> Future[T]:
        """Queue a write; the future resolves once it is committed (or failed). Never blocks.

        While the file is off for a transient reason the write is held until it is back
        (``hold=False``: failed at once, for a caller that waits), unless the hold limit is
        reached: then it fails with ``StorageUnavailable`` and is counted as dropped."""
        job: w.Job[T] = w.Job(fn, exclusive, on_commit, on_rollback, label, hold)
        with self._queue.cond:
            if self._closed:
                job.future.set_exception(StorageError(f"{self.path} is closed"))
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
                self.path,
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
            self._tally.drop([j for j in jobs if j.fn is not _noop])  # flush/open: no data
        err = self._unavailable()
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(err)

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

    # -- the writer thread ------------------------------------------------------------------

    def _start_writer(self) -> None:
        """Caller holds the queue's condition."""
        thread = threading.Thread(
            target=self._writer_main, name=f"ember-writer:{self.path.parent.name}", daemon=True
        )
        self._writer = thread
        self._suspend = False
        thread.start()

    def _writer_main(self) -> None:
        try:
            while self._session():
                pass
        finally:
            with self._queue.cond:
                if self._writer is threading.current_thread():
                    self._writer = None
                    # Jobs that arrived while this thread was leaving get a writer of their own.
                    if len(self._queue) and not self._closed:
                        self._start_writer()

    def _session(self) -> bool:
        """Open the file and run batches until idle, closed or failed. True: go round again
        (a transient failure left writes held; the next attempt waits for the backoff)."""
        if self._health.state == "corrupt":
            self._drop_queued()  # raced with the failure: never reopen a damaged file
            return False
        if self._health.state in TRANSIENT:
            self._wait_for_retry()
        try:
            conn, lock_fd = self._open_writer()
        except w.FileFailure as refused:
            return self._gap(refused.state, refused.cause, [])
        except Exception as exc:
            return self._gap(classify(exc) or "unwritable", exc, [])
        failure: w.FileFailure | None = None
        batch: list[w.Job[Any]] = []
        try:
            failure, batch = self._serve(conn)
            if failure is not None:  # before the close: a damaged file is quarantined
                self._fail(failure.state, failure.cause)
        finally:
            self._let_go(conn)
            _unlock(lock_fd)
        if failure is None:
            return False
        return self._gap(failure.state, failure.cause, batch)

    def _let_go(self, conn: Connection) -> None:
        """Close the writer's connection: quarantined when the file is damaged, else last
        (readers never checkpoint: the writer's close copies the WAL into the file and
        removes it, as a clean stop should)."""
        if self._health.state == "corrupt":
            self._quarantine(conn)
            return
        self._close_readers()
        with contextlib.suppress(errors.Error):
            conn.close()

    def _wait_for_retry(self) -> None:
        """Sleep until the retry is due; a closing database retries at once (its last try)."""
        with self._queue.cond:
            while not self._closed:
                left = self._retry_at - time.monotonic()
                if left <= 0:
                    return
                self._queue.cond.wait(left)

    def _open_writer(self) -> tuple[Connection, int | None]:
        existed = self.path.exists()
        if existed and not self._checked:
            self._check_wal()
        opened = connect(self.path, vec=self.vec)
        conn = opened.conn
        lock_fd: int | None = None
        try:
            self.vec_problem = opened.vec_problem
            # The WAL reaches the main file only after a check passed (``_check``).
            conn.execute("PRAGMA wal_autocheckpoint=0")
            lock_fd = _lock_shared(self.path)
            if existed and not self._checked:
                self._check_file()  # damage from before this process: never write on it
            migrate(conn, self.schema.migrations)
        except BaseException as exc:
            if _state_of(exc) == "corrupt":  # before the close: a damaged file is quarantined
                self._fail("corrupt", exc.cause if isinstance(exc, w.FileFailure) else exc)
            self._let_go(conn)
            _unlock(lock_fd)
            raise
        self._checked = True
        self._checked_at = time.monotonic()
        self._migrated.set()
        return conn, lock_fd

    def _check_wal(self) -> None:
        """Read a WAL a stopped process left, before SQLite's recovery does: that recovery
        stops at the first frame whose checksum fails, silently, and the next commits then
        overwrite the frames after it — commits ``ember doctor --recover`` could still read.
        Damage there (frames of this WAL, or garbage, past a bad one) switches the file off
        as corrupt; a WAL that merely ends inside a frame (a power loss tore the last write)
        is said once and opened: its last commit is gone either way."""
        wal = Path(str(self.path) + "-wal")
        try:
            size = wal.stat().st_size
        except OSError:
            return
        if size <= 32 or size > WAL_READ_BYTES or in_use(self.path):
            return  # nothing left behind, too large to read here, or in use (it is live)
        try:
            scan = read_wal(wal.read_bytes())
        except OSError:
            return
        if scan.unverifiable:
            raise w.FileFailure("corrupt", StorageError(f"the WAL is damaged: {scan.damage}"))
        if scan.torn and self._log_failures:
            log.warning("database %s: %s; its last commit is lost", self.path, scan.damage)

    def _serve(self, conn: Connection) -> tuple[w.FileFailure | None, list[w.Job[Any]]]:
        """Run batches until idle, suspended or closed (then ``(None, [])``, after a last
        check of what was written), or until the file fails: the failure and its batch."""
        idle_since = time.monotonic()
        while True:
            failure = self._due_check(conn)
            if failure is not None:
                return failure, []
            with self._queue.cond:
                closing = self._closed and len(self._queue) == 0
                leaving = closing or (self._suspend and len(self._queue) == 0)
                batch = None if leaving else self._queue.take(self._wake_in(idle_since))
                if batch is None:
                    idle = time.monotonic() - idle_since >= self._idle_seconds
                    if leaving or idle or self._suspend:
                        break
                    continue
                self._busy = True
            try:
                w.run_batch(conn, batch, time.sleep)
            except w.FileFailure as failure:
                return failure, batch
            finally:
                self._busy = False
            self._committed(batch)
            idle_since = time.monotonic()
        return self._check(conn) if self._unchecked else None, []

    def _committed(self, batch: list[w.Job[Any]]) -> None:
        self.stats.record(batch)
        self._release(batch, written=True)
        self._unchecked = True
        self._retries = 0
        if not self._health.ok:
            self._recovered()
        if self._wal_grew():
            self._check_now = True

    def _wal_grew(self) -> bool:
        """Whether the WAL grew by ``WAL_CHECK_BYTES`` since the last check.

        Growth, not size: a WAL file keeps its size after a checkpoint (its frames are then
        rewritten from the start), so "is it past 16 MB" stayed true for good once it was, and
        a ``quick_check`` ran after every commit — half of a busy proxy's CPU (py-spy)."""
        size = _wal_bytes(self.path)
        self._wal_mark = min(self._wal_mark, size)  # truncated since
        return size - self._wal_mark >= WAL_CHECK_BYTES

    def _wake_in(self, idle_since: float) -> float:
        """How long the writer may sleep: until it is idle long enough to close, or until
        the next check is due."""
        now = time.monotonic()
        wake = idle_since + self._idle_seconds - now
        if self._unchecked:
            wake = min(wake, self._checked_at + self._check_seconds - now)
        return max(0.01, wake)

    def _due_check(self, conn: Connection) -> w.FileFailure | None:
        """Check the file when a check is due; a reader that found damage counts as due."""
        if self._health.state == "corrupt":
            return w.FileFailure("corrupt", StorageError(self._health.detail))
        due = time.monotonic() - self._checked_at >= self._check_seconds
        if self._unchecked and (due or self._check_now):
            return self._check(conn)
        return None

    def _check(self, conn: Connection) -> w.FileFailure | None:
        """``quick_check`` the file as it is on disk, then let the checked WAL frames into the
        main file (a passive checkpoint). The failure found, if any."""
        try:
            self._check_file()
            _execute(conn, "PRAGMA wal_checkpoint(PASSIVE)")
        except w.FileFailure as failure:
            return failure
        finally:
            self._checked_at = time.monotonic()
            self._check_now = False
            self._wal_mark = _wal_bytes(self.path)
        self._unchecked = False
        return None

    def _check_file(self) -> None:
        """Raise ``FileFailure`` when ``PRAGMA quick_check`` finds damage. A fresh connection:
        the writer's page cache still holds the pages it wrote, whatever the disk now has."""
        try:
            fresh = connect(self.path, readonly=True).conn
        except errors.Error as exc:
            state = classify(exc)
            if state == "corrupt":
                raise w.FileFailure(state, exc) from exc
            return  # cannot look now (busy, I/O): the writes themselves will tell
        try:
            found = [str(r[0]) for r in fresh.execute("PRAGMA quick_check(3)")]
        except errors.Error as exc:
            if classify(exc) == "corrupt":
                raise w.FileFailure("corrupt", exc) from exc
            return
        finally:
            fresh.close()
        if found != ["ok"]:
            raise w.FileFailure("corrupt", StorageError("quick_check: " + "; ".join(found)))

    def _gap(self, state: State, cause: BaseException, batch: list[w.Job[Any]]) -> bool:
        """The file failed with ``batch`` (rolled back, futures open) in hand. Transient:
        hold what may be held, drop the rest, schedule the retry; True while writes are held
        (the writer retries them). Corrupt, or closing: drop everything; False."""
        self._fail(state, cause)
        if state not in TRANSIENT:
            self._drop(batch)
            self._drop_queued()
            return False
        with self._queue.cond:
            self._queue.requeue(batch)
            shed = self._queue.shed(self._reserve)
            closing = self._closed
            self._retry_at = time.monotonic() + retry_delay(self._retries, RETRY_AFTER_SECONDS)
            self._retries += 1
            held = len(self._queue)
        self._drop(shed)
        if closing:
            self._give_up()
            return False
        return held > 0

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
                self.path,
                self._health.state,
                len(jobs),
                "storage-problems.json" if self._on_problem else "its health",
            )
        self._report()

    def _drop_queued(self) -> None:
        with self._queue.cond:
            jobs = self._queue.drain()
        self._drop(jobs)

    def _quarantine(self, conn: Connection) -> None:
        """Close a damaged file without a checkpoint: a guard holds the shared lock, so no
        close of this process copies damaged WAL frames into the main file (``driver.guard``).
        The guard stays open until ``close`` — the last connection of the process to close."""
        if self._guard is None:
            self._guard = guard(self.path)
        with contextlib.suppress(errors.Error):
            conn.close()
        self._close_readers()

    # -- reads ------------------------------------------------------------------------------

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` on a read-only connection in one read transaction (a consistent
        snapshot). Blocking: worker threads and the CLI; async code uses ``aread``."""
        self._ensure_migrated()
        conn = self._take_reader()
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
            raise StorageUnavailable(Health(str(self.path), state, str(exc)).describe()) from exc
        finally:
            self._give_back(conn)

    async def aread(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self.read, fn)

    def _ensure_migrated(self) -> None:
        if self._health.state == "corrupt":
            raise self._unavailable()
        if not self._migrated.is_set():
            self.submit(_noop, label="open", hold=False).result()

    def _take_reader(self) -> Connection:
        with self._state_lock:
            if self._readers:
                return self._readers.pop()
        opened = connect(self.path, readonly=True, vec=self.vec and self.vec_problem is None)
        return opened.conn

    def _give_back(self, conn: Connection) -> None:
        with self._state_lock:
            if len(self._readers) < IDLE_READERS and not self._closed and self.open:
                self._readers.append(conn)
                return
        with contextlib.suppress(errors.Error):
            conn.close()

    def _close_readers(self) -> None:
        with self._state_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(errors.Error):
                conn.close()
        with self._observer_lock:
            if self._observer is not None:
                with contextlib.suppress(errors.Error):
                    self._observer.close()
                self._observer = None

    def data_version(self) -> int:
        """A number that changes whenever any connection commits to the file — another
        process included (``PRAGMA data_version`` of one dedicated connection)."""
        self._ensure_migrated()
        with self._observer_lock:
            if self._observer is None:
                self._observer = connect(self.path, readonly=True).conn
            return int(self._observer.execute("PRAGMA data_version").fetchone()[0])

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
                log.error("database %s: writes still pending after %.0fs", self.path, timeout)
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


class _Tally:
    """The counts of one owner's gaps (guarded by the owner's ``_state_lock``)."""

    def __init__(self) -> None:
        self.held = 0
        self.caught_up = 0
        self.dropped: Counter[str] = Counter()
        self.limit_hit = False

    def new_gap(self) -> None:
        self.limit_hit = False

    def drop(self, jobs: list[w.Job[Any]]) -> None:
        self.dropped.update(kind_of(j.label) for j in jobs)

    def onto(self, health: Health) -> Health:
        return replace(
            health,
            held=self.held,
            caught_up=self.caught_up,
            dropped=sum(self.dropped.values()),
            dropped_by=tuple(sorted(self.dropped.items())),
        )


class WriteStats:
    """How the writer is doing: jobs and batches committed, and how long a job waited from
    ``submit`` to its commit (the window a ``kill -9`` can lose), over the last jobs."""

    def __init__(self, keep: int = 20000) -> None:
        self.jobs = 0
        self.batches = 0
        self._waits: deque[float] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def record(self, batch: list[w.Job[Any]]) -> None:
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


def _noop(conn: Connection) -> None:
    return None


def _state_of(exc: BaseException) -> State | None:
    return exc.state if isinstance(exc, w.FileFailure) else classify(exc)


def _succeeded(future: Future[Any]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _execute(conn: Connection, sql: str) -> None:
    """Run ``sql``; a file-level error becomes ``FileFailure``."""
    try:
        conn.execute(sql).fetchall()
    except errors.Error as exc:
        state = classify(exc)
        if state is not None:
            raise w.FileFailure(state, exc) from exc
        raise


def _wal_bytes(path: Path) -> int:
    try:
        return os.stat(str(path) + "-wal").st_size
    except OSError:
        return 0


def _lock_shared(path: Path) -> int | None:
    """Hold a shared lock on ``<file>.lock`` while the file is open (best effort)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def in_use(path: Path) -> bool:
    """Whether some process (a proxy, a CLI command) has ``path`` open as its owner."""
    if fcntl is None or not lock_path(path).exists():
        return False
    fd = os.open(lock_path(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
