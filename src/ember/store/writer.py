"""The one writer of a database: a thread that runs write jobs in batched transactions.

Invariants:
- Only this thread writes through its connection, so no two writes of this process ever
  interleave, whatever thread or event loop asked for them.
- Jobs queued together commit together (one ``BEGIN IMMEDIATE ... COMMIT``), each inside its
  own savepoint: a job that fails on a statement (a constraint, a bug) is rolled back alone
  and its siblings still commit. An *exclusive* job (a memory write whose vector index lives
  outside SQLite) gets a transaction of its own.
- A future is resolved only after its transaction committed (or is known not to), and a
  job's ``on_commit`` hook runs only after the commit: nothing outside SQLite (an hnsw graph,
  a cache) ever shows a change that was rolled back.
- Another process holding the write lock (a second proxy, the CLI) is waited for — the busy
  timeout, then retries with backoff for ``BUSY_BUDGET_SECONDS`` — never a silent drop.
- A file-level failure (corrupt, read-only, disk full, I/O error) stops the batch, rolls it
  back and raises ``FileFailure`` with every future of the batch still unresolved: the owner
  decides (``store.database``) whether the jobs are held until the file is back or dropped —
  a job is never resolved twice, and never run twice in a committed transaction.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ember.store.driver import Connection, errors
from ember.store.health import State, classify

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Jobs committed in one transaction at most (a burst of accounting rows).
MAX_BATCH = 512
#: How long a batch keeps retrying while another process holds the write lock.
BUSY_BUDGET_SECONDS = 60.0


@dataclass(eq=False)
class Job(Generic[T]):
    fn: Callable[[Connection], T]
    exclusive: bool = False
    on_commit: Callable[[], None] | None = None
    on_rollback: Callable[[], None] | None = None
    label: str = ""
    #: kept through a gap (held in memory until the file is back); False for a caller that
    #: waits for the answer (``write``/``awrite``): it is failed at once instead
    hold: bool = True
    #: the caller keeps what the write carries and submits it again (a periodic flush):
    #: refused, nothing is lost yet, so it is not counted as dropped; the caller counts what
    #: it gives up in the end (``Database.lost``)
    retried: bool = False
    future: Future[T] = field(default_factory=Future)
    queued_at: float = field(default_factory=time.monotonic)
    #: counted as held (it has room in the process's hold limit until written or dropped)
    reserved: bool = False


class FileFailure(Exception):
    """A file-level error inside a batch; carries the classified state."""

    def __init__(self, state: State, cause: BaseException) -> None:
        super().__init__(f"{state}: {cause}")
        self.state = state
        self.cause = cause


class _Busy(Exception):
    pass


class JobQueue:
    """FIFO of jobs; ``take`` hands out one exclusive job or a run of batchable ones."""

    def __init__(self) -> None:
        self._jobs: deque[Job[Any]] = deque()
        self.cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._jobs)

    def put(self, job: Job[Any]) -> None:
        """Caller holds ``cond``."""
        self._jobs.append(job)
        self.cond.notify()

    def take(self, timeout: float) -> list[Job[Any]] | None:
        """Caller holds ``cond``. None when nothing came within ``timeout``."""
        if not self._jobs:
            self.cond.wait(timeout)
            if not self._jobs:
                return None
        first = self._jobs.popleft()
        batch = [first]
        if first.exclusive:
            return batch
        while self._jobs and len(batch) < MAX_BATCH and not self._jobs[0].exclusive:
            batch.append(self._jobs.popleft())
        return batch

    def peek(self) -> list[Job[Any]]:
        """The queued jobs, in order, left queued. Caller holds ``cond``."""
        return list(self._jobs)

    def drain(self) -> list[Job[Any]]:
        """Caller holds ``cond``."""
        jobs = list(self._jobs)
        self._jobs.clear()
        return jobs

    def requeue(self, jobs: list[Job[Any]]) -> None:
        """Put ``jobs`` back at the head, in their order (a batch the file refused). Caller
        holds ``cond``."""
        self._jobs.extendleft(reversed(jobs))

    def shed(self, keep: Callable[[Job[Any]], bool]) -> list[Job[Any]]:
        """Take out, in order, the jobs ``keep`` refuses; returns them. Caller holds ``cond``."""
        kept: deque[Job[Any]] = deque()
        shed: list[Job[Any]] = []
        for job in self._jobs:
            (kept.append if keep(job) else shed.append)(job)
        self._jobs = kept
        return shed


def run_batch(conn: Connection, jobs: list[Job[Any]], sleep: Callable[[float], None]) -> None:
    """Run ``jobs`` in one transaction, retrying while the database is busy.

    Resolves every job's future, except when the file itself failed: then it raises
    ``FileFailure`` and leaves the futures to the caller, which holds or drops the jobs.
    """
    deadline = time.monotonic() + BUSY_BUDGET_SECONDS
    delay = 0.05
    warned = False
    while True:
        try:
            results = _attempt(conn, jobs)
        except _Busy as exc:
            if time.monotonic() >= deadline:
                raise FileFailure("busy", exc) from exc
            if not warned:  # once per batch: the retries below are bounded by the budget
                log.warning("database busy (another process writes); retrying %d writes", len(jobs))
                warned = True
            sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        except _StatementFailure as failure:  # a lone job failed: only it is rolled back
            fail_all(jobs, failure.cause)
            return
        resolve(results)
        return


Results = list[tuple[Job[Any], Any, BaseException | None]]


def _attempt(conn: Connection, jobs: list[Job[Any]]) -> Results:
    _execute(conn, "BEGIN IMMEDIATE")
    ran: list[Job[Any]] = []
    results: Results = []
    savepoints = len(jobs) > 1
    try:
        for job in jobs:
            ran.append(job)
            results.append(_run_one(conn, job, savepoints))
        _execute(conn, "COMMIT")
    except BaseException:
        # SQLite may have rolled the transaction back itself already (nothing left to undo).
        with contextlib.suppress(errors.Error):
            conn.execute("ROLLBACK")
        for job in ran:
            run_hook(job.on_rollback, job)
        raise
    return results


def _run_one(
    conn: Connection, job: Job[Any], savepoint: bool
) -> tuple[Job[Any], Any, BaseException | None]:
    if savepoint:
        conn.execute("SAVEPOINT job")
    try:
        value = job.fn(conn)
    except Exception as exc:
        state = classify(exc)
        if state is not None and state != "busy":
            raise FileFailure(state, exc) from exc
        if not savepoint:
            raise _StatementFailure(exc) from exc
        conn.execute("ROLLBACK TO job")
        conn.execute("RELEASE job")
        return job, None, exc
    if savepoint:
        conn.execute("RELEASE job")
    return job, value, None


class _StatementFailure(Exception):
    """An exclusive job failed on a statement: its transaction is rolled back, nothing else."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _execute(conn: Connection, sql: str) -> None:
    try:
        conn.execute(sql)
    except errors.Error as exc:
        state = classify(exc)
        if state == "busy":
            raise _Busy(str(exc)) from exc
        if state is not None:
            raise FileFailure(state, exc) from exc
        raise


def resolve(results: Results) -> None:
    for job, value, exc in results:
        if exc is None:
            run_hook(job.on_commit, job)
            if not job.future.done():
                job.future.set_result(value)
        else:
            run_hook(job.on_rollback, job)
            if not job.future.done():
                job.future.set_exception(exc)


def fail_all(jobs: list[Job[Any]], exc: BaseException) -> None:
    for job in jobs:
        if not job.future.done():
            job.future.set_exception(exc)


def run_hook(fn: Callable[[], None] | None, job: Job[Any]) -> None:
    if fn is None:
        return
    try:
        fn()
    except Exception:
        log.exception("after-write hook of %s failed", job.label or "a write")
