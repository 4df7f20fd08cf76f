"""``PgDatabase``: what a project keeps, in its schema of a PostgreSQL server.

The same owner as a SQLite file's (``store.database.Database``), with the same interface and
the same promises to callers — ``submit`` never blocks and is batched, ``write``/``awrite`` wait
for their own job, reads see one snapshot, a gap's writes are held (``store.hold``) and
retried, awaited writes and reads fail at once with ``StorageUnavailable`` while the store is
off, and each change of health is said once. Only what touches the store differs:

- The "file" is a schema (``pg.names``): every transaction a connection serves is confined
  to it by ``SET LOCAL search_path`` (``pg.migrate.enter``), so no statement of a project's
  features can read or write another project's tables.
- Connections are borrowed from the process's pool for the URL (``pg.pool``), one per read or
  per batch; the writer thread keeps none while idle.
- Opening is migrating (``pg.migrate``), on the writer thread, under the schema's advisory
  lock: several processes opening one project at once create it once.
- ``data_version`` is the schema's counter, bumped by every write transaction of every
  process (``pg.batch``), read in one statement.
- No file checks: damage, WAL and quarantine are the server's business. A server that cannot
  be reached is ``unreachable``, a transient state: held, retried, back by itself.
- Reads of a database switched off fail at once until a retry is due (``_gate``), then try
  the server again: a project that only reads comes back as soon as the server does.
- A server that cannot be reached is the server's business, not one schema's
  (``pg.watch``): said once per server, tried in the background while down (every schema
  comes back without traffic), and every schema fails at once while it is known to be down.
  A writer waits for the watch instead of trying the server on its own.
- Writes that can be written down (``store.ops.Op``) are journaled on the local disk until
  committed (``pg.held``, ``pg.journal``): an outage holds them whatever its length, up to
  the journal's bound, and a stop or a kill during it loses none of them.

The writer loop's hooks are the SQLite owner's (``writerloop.WriterLoop``: ``_gap``,
``_wait_for_retry``); the file-specific half of it (open, check, checkpoint, quarantine) is
replaced by ``_session`` here and never runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ember.errors import StorageUnavailable
from ember.store import writer as w
from ember.store.database import IDLE_SECONDS, ProblemHook
from ember.store.driver import Connection
from ember.store.health import TRANSIENT, Health, State, retry_delay
from ember.store.hold import HoldLimit
from ember.store.migrations import Schema
from ember.store.pg import pool as pools
from ember.store.pg.batch import CommitUnknown, run_batch, settle
from ember.store.pg.connection import Dialect, PgConnection
from ember.store.pg.failures import classify
from ember.store.pg.held import HeldWrites, JournalSource
from ember.store.pg.migrate import migrate, quoted, require_ported, set_schema
from ember.store.pg.unsure import Unsure
from ember.store.pg.url import where
from ember.store.pg.watch import watch_for

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger("ember.store.database")

T = TypeVar("T")


#: How long a lost COMMIT's outcome is asked for before its jobs wait for the next retry.
SETTLE_SECONDS = 1.0


#: How long a migration may keep the server busy (a new index on a large table).
MIGRATE_SECONDS = 900.0


class PgDatabase(HeldWrites):
    def __init__(
        self,
        path: Path,
        schema: Schema,
        *,
        url: str,
        schema_name: str,
        on_problem: ProblemHook | None = None,
        idle_seconds: float = IDLE_SECONDS,
        log_failures: bool = True,
        hold: HoldLimit | None = None,
        journal: JournalSource | None = None,
    ) -> None:
        """``path``: the file the project would have (callers key on it); ``schema_name``:
        where its data is (``pg.names.schema_name``); ``journal``: the process's write
        journal (``pg.held``; None: nothing is journaled). Raises ``StorageError`` when
        ``schema`` needs a migration with no PostgreSQL form."""
        self.url = url
        self.schema_name = schema_name
        self._label = where(schema_name, url)
        require_ported(schema, self._label)
        super().__init__(
            path,
            schema,
            vec=False,
            on_problem=on_problem,
            idle_seconds=idle_seconds,
            log_failures=log_failures,
            hold=hold,
        )
        self._pool_lock = threading.Lock()
        self._held_pool: ConnectionPool[Any] | None = None
        self._reads_retry_at = 0.0  # monotonic: when a read may try a store that is off
        self._reads_retries = 0
        self._unsure = Unsure()  # jobs whose COMMIT was lost with the connection
        self._journal_of = journal
        self._watch = watch_for(url)
        self._watch.join(self)

    @property
    def where(self) -> str:
        return self._label

    @property
    def dialect(self) -> Dialect:
        return "postgres"

    def _gap_policy(self, state: State) -> str:
        journal = self.journal
        if journal is not None:
            return (
                f"holding writes in {journal.directory} (up to {journal.limit // 1_000_000} MB"
                ", kept through a restart) until it is back"
            )
        if self._hold is None or self._hold.limit == 0:
            return "its writes are dropped and counted until the server is back"
        return (
            f"its writes are held in memory (up to {self._hold.limit} in all) and written "
            "when the server is back"
        )

    # -- the server's health (``pg.watch``) ---------------------------------------------------

    def _say_off(self, state: State, cause: BaseException) -> None:
        if state == "unreachable":
            return  # the watch says it, once per server (``_fail`` told it)
        super()._say_off(state, cause)

    def _fail(self, state: State, cause: BaseException) -> None:
        super()._fail(state, cause)
        if state == "unreachable":
            self._watch.went_down(cause, self._gap_policy(state), say=self._log_failures)

    def _say_back(self, before: Health, tally: Health) -> None:
        if before.state == "unreachable":
            return  # the watch says it, with what every schema held and delivered
        super()._say_back(before, tally)

    def _recovered(self) -> None:
        was = self._health.state
        super()._recovered()
        if was == "unreachable":
            self._watch.came_back()

    def server_back(self) -> None:
        """The watch reached the server: retry now; a schema with nothing to write is back
        at once (its health said "unreachable" until a request of its project came)."""
        with self._queue.cond:
            self._retry_at = 0.0
            self._reads_retry_at = 0.0
            self._reads_retries = 0
            idle = len(self._queue) == 0 and not self._busy
            self._queue.cond.notify_all()
        if idle and self._health.state == "unreachable":
            self._recovered()

    def _known_down(self) -> BaseException | None:
        """The watch's cause while the server is known to be down."""
        watch = self._watch
        return ConnectionError(watch.cause) if watch.down else None

    def _wait_for_watch(self) -> None:
        """Sleep while the server is known down: until the watch reaches it (``server_back``
        notifies), a close, or a write that cannot be held arrives (it is failed now)."""
        with self._queue.cond:
            while not self._closed and self._watch.down and not self._waited_for():
                self._queue.cond.wait(1.0)

    def _waited_for(self) -> bool:
        """A queued write whose caller waits for it. Caller holds the queue's condition."""
        return any(not j.hold for j in self._queue.peek())

    def _pool(self) -> ConnectionPool[Any]:
        with self._pool_lock:
            if self._held_pool is None:
                self._held_pool = pools.acquire(self.url)
            return self._held_pool

    # -- the writer thread ------------------------------------------------------------------

    def _session(self) -> bool:
        """Migrate once, then run batches until idle, closed or failed. True: go round again
        (a transient failure left writes held)."""
        down = self._known_down()
        if down is not None:  # not worth the pool's timeout: the watch tells when it is back
            if not self._gap("unreachable", down, []):  # fails what cannot be held
                return False
            self._wait_for_watch()
            return True
        if self._health.state in TRANSIENT:
            self._wait_for_retry()
        try:
            if not self._migrated.is_set():
                pools.borrowed(
                    self._pool(),
                    lambda c: migrate(c, self.schema_name, self.schema),
                    MIGRATE_SECONDS,
                )
                self._migrated.set()
        except Exception as exc:
            return self._gap(classify(exc) or "unwritable", exc, [])
        failure, batch = self._serve_batches()
        if failure is None:
            return False
        return self._gap(failure.state, failure.cause, batch)

    def _serve_batches(self) -> tuple[w.FileFailure | None, list[w.Job[Any]]]:
        idle_since = time.monotonic()
        while True:
            with self._queue.cond:
                leaving = (self._closed or self._suspend) and len(self._queue) == 0
                wake = max(0.01, idle_since + self._idle_seconds - time.monotonic())
                batch = None if leaving else self._queue.take(wake)
                if batch is None:
                    idle = time.monotonic() - idle_since >= self._idle_seconds
                    if leaving or idle or self._suspend:
                        return None, []
                    continue
                self._busy = True
            try:
                self._write_batch(batch)
            except w.FileFailure as failure:
                return failure, batch
            finally:
                self._busy = False
            self._committed(batch)
            idle_since = time.monotonic()

    def _write_batch(self, batch: list[w.Job[Any]]) -> None:
        try:
            try:
                pools.borrowed(self._pool(), lambda conn: self._run(conn, batch))
            except CommitUnknown as unknown:
                self._settle_now(unknown)
        except w.FileFailure:
            raise
        except Exception as exc:  # no connection to be had (or none to give back)
            raise w.FileFailure(classify(exc) or "unreachable", exc) from exc

    def _run(self, conn: psycopg.Connection[Any], batch: list[w.Job[Any]]) -> None:
        todo = self._unsure.outstanding(conn, batch)
        if todo:
            run_batch(conn, self.schema_name, todo)

    def _settle_now(self, unknown: CommitUnknown) -> None:
        """Ask at once on another connection whether the lost COMMIT took: a caller waiting
        for its write gets the answer it would have had. Returns when it did; raises
        ``FileFailure`` otherwise (when it did not, the batch runs again; when no one can
        say yet, its jobs wait in ``_unsure`` and never run before the server says). The
        server may still be finishing that COMMIT ("in progress"): asked again for up to
        ``SETTLE_SECONDS``."""
        deadline = time.monotonic() + SETTLE_SECONDS
        outcome: bool | None = None
        while outcome is None and time.monotonic() < deadline:
            try:
                outcome = pools.borrowed(self._pool(), lambda conn: settle(conn, unknown))
            except Exception:  # the server is gone: ask when it is back
                break
            if outcome is None:
                time.sleep(0.02)
        if outcome is None:
            self._unsure.remember(unknown)
            raise unknown
        self._unsure.forget(unknown, committed=outcome)
        if not outcome:
            raise unknown

    def _committed(self, batch: list[w.Job[Any]]) -> None:
        self.stats.record(batch)
        self._release(batch, written=True)
        self._note_done(batch)
        self._retries = 0
        if not self._health.ok:
            self._recovered()

    def _close_readers(self) -> None:
        """Nothing to close: reads borrow from the pool."""

    def reopen(self) -> None:
        super().reopen()
        self._watch.join(self)

    def close(self, timeout: float = 30.0) -> None:
        super().close(timeout)
        self._watch.leave(self)
        with self._pool_lock:
            held, self._held_pool = self._held_pool, None
        if held is not None:
            pools.release(self.url)

    # -- reads ------------------------------------------------------------------------------

    def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one read-only transaction (one snapshot) on the schema. The
        transaction is opened and pointed at the schema in one round trip (a memory search
        makes three reads; four round trips of set-up each were a third of its time)."""
        begin = f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {set_schema(self.schema_name)}"

        def run(conn: psycopg.Connection[Any]) -> T:
            conn.execute(cast(Any, begin))
            try:
                value = fn(PgConnection(conn))  # type: ignore[arg-type]
            except BaseException:
                if not conn.broken:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return value

        return self._reading(run)

    def data_version(self) -> int:
        """The schema's write counter: it changes with every commit of any process."""
        table = f"{quoted(self.schema_name)}._ember_version"

        def run(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(cast(Any, f"SELECT n FROM {table}")).fetchone()
            return int(row[0]) if row else 0

        return self._reading(run)

    def exists(self) -> bool:
        """Whether the schema exists (a read that must create nothing: ``ember stats`` of a
        project never seen). ``StorageUnavailable`` when the server cannot be reached."""

        def run(conn: psycopg.Connection[Any]) -> bool:
            found = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema_name,)
            ).fetchone()
            return found is not None

        self._gate()
        return self._on_server(run)

    def _reading(self, run: Callable[[psycopg.Connection[Any]], T]) -> T:
        self._gate()
        self._ensure_migrated()
        return self._on_server(run)

    def _on_server(self, run: Callable[[psycopg.Connection[Any]], T]) -> T:
        try:
            value = pools.borrowed(self._pool(), run)
        except Exception as exc:
            state = classify(exc)
            if state is None:
                raise
            self._reads_failed(state, exc)
            raise StorageUnavailable(Health(self.where, state, str(exc)).describe()) from exc
        if not self._health.ok and self._health.state in TRANSIENT:
            self._reads_back()
        return value

    def _gate(self) -> None:
        """Fail at once while the store is off and no retry is due (the writer's, for held
        writes, or the reads' own)."""
        down = self._known_down()
        if down is not None:
            if self._health.ok:
                self._fail("unreachable", down)
            raise self._unavailable()
        health = self._health
        if health.ok:
            return
        due = max(self._retry_at, self._reads_retry_at)
        if health.state not in TRANSIENT or time.monotonic() < due:
            raise self._unavailable()

    def _reads_failed(self, state: State, exc: BaseException) -> None:
        with self._queue.cond:
            self._reads_retry_at = time.monotonic() + retry_delay(self._reads_retries)
            self._reads_retries += 1
        self._fail(state, exc)

    def _reads_back(self) -> None:
        """A read reached the store while it was off: it is back; a writer waiting for its
        retry tries now."""
        with self._queue.cond:
            self._reads_retries = 0
            self._retry_at = 0.0
            self._queue.cond.notify_all()
        self._recovered()
