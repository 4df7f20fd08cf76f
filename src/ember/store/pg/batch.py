"""One batch of write jobs in one PostgreSQL transaction (the SQLite writer's ``run_batch``).

Invariants, the same as SQLite's (``store.writer``), and what each prevents:

- The batch commits as one transaction, and a job that fails on a statement (a constraint, a
  bug) is rolled back alone while its siblings still commit. A savepoint costs two round
  trips per job (three times an insert's), so a batch first runs without them; only when a
  job fails is it rolled back and run again with a savepoint per job. Jobs are written to be
  run again (the SQLite writer reruns a batch that met a busy file too). An exclusive job
  has the transaction to itself.
- The transaction serves one schema (``SET LOCAL search_path``), takes the schema's writer
  lock first (``serial.WRITER_LOCK``, the same round trip) and bumps the schema's version
  counter last (``data_version``): the bump commits with the rows, never before. The lock
  makes a schema's batches one at a time across processes, as a SQLite file's are: a job
  that reads, changes and writes back a row never works from a stale one, and two batches
  never wait on each other's row locks in opposite orders (a deadlock the server breaks by
  aborting one, a second later).
- A future is resolved only after the commit, and a job's ``on_commit`` runs only then.
- A store-level failure (``pg.failures.classify``: the server unreachable, its disk full...)
  rolls the batch back and raises ``FileFailure`` with every future still open: the owner
  holds the jobs through the gap or drops them, never resolves one twice.
- A serialization failure or a deadlock is retried here a few times first: another process
  writing the same schema at the same moment is a wait, not an outage.
- A batch is never written twice. When the connection is lost while its COMMIT is on the
  wire, the client cannot tell whether it committed; writing it again (as a lost file
  write is) would duplicate every row whose key is not natural (accounting rows, memory
  evidence). The batch's transaction id travels with the version bump (no extra round
  trip), and ``CommitUnknown`` carries it: the owner asks the server
  (``pg_xact_status``) before running those jobs again, and resolves them as committed
  when they were (``settle``).
- A journaled write (``store.ops.Op`` with a key) is recorded in ``_ember_delivered`` by the
  transaction that applies it, in the version bump's statement (no extra round trip); one
  replayed from a journal is looked up there first and skipped when it is in. A write a
  stopped process left in its journal after its COMMIT took (a kill between the COMMIT and
  the journal's note, a COMMIT whose answer was lost before a stop) is applied once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from ember.store.ops import Op, key_of
from ember.store.pg.connection import PgConnection
from ember.store.pg.failures import classify
from ember.store.pg.migrate import BUMP_VERSION, set_schema
from ember.store.pg.serial import WRITER_LOCK
from ember.store.writer import FileFailure, Job, fail_all, resolve, run_hook

if TYPE_CHECKING:
    import psycopg

#: Tries of a batch that met a serialization failure or a deadlock, before it counts as busy.
CONFLICT_TRIES = 5
#: The version bump, naming the transaction it commits with.
BUMP_NAMING_XID = BUMP_VERSION + " RETURNING pg_current_xact_id()::text"
#: The same, recording the keys of the journaled writes the transaction applies.
BUMP_RECORDING_KEYS = (
    "WITH delivered AS (INSERT INTO _ember_delivered (key, at) "
    "SELECT k, now() FROM unnest(%s::bigint[]) AS k ON CONFLICT DO NOTHING) " + BUMP_NAMING_XID
)
#: Which of the given keys a transaction already applied.
DELIVERED = "SELECT key FROM _ember_delivered WHERE key = ANY(%s::bigint[])"

Results = list[tuple[Job[Any], Any, BaseException | None]]


class CommitUnknown(FileFailure):
    """The connection was lost while the batch's COMMIT was on the wire: ``xid`` committed
    or not, and only the server knows (``settle``). ``results`` are the jobs' values, what
    their futures get if it did."""

    def __init__(self, state: Any, cause: BaseException, xid: str, results: Results) -> None:
        super().__init__(state, cause)
        self.xid = xid
        self.results = results


def settle(conn: psycopg.Connection[Any], unknown: CommitUnknown) -> bool | None:
    """Whether the batch of ``unknown`` committed: True (resolve it as written), False (it
    did not: run it again), None (the server cannot say yet: its backend has not noticed the
    lost connection; ask again later, never run it meanwhile)."""
    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (unknown.xid,)).fetchone()
    status = None if row is None else row[0]
    if status == "committed":
        return True
    if status == "in progress":
        return None
    return False  # aborted, or too old to know: a transaction that old never committed late


class _StatementFailure(Exception):
    """A job failed on a statement with no savepoint around it: the transaction is rolled
    back (a lone job's failure is its own; in a batch, the batch runs again with them)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def run_batch(conn: psycopg.Connection[Any], schema: str, jobs: list[Job[Any]]) -> None:
    """Run ``jobs`` in one transaction on ``schema``; resolves every future, except when the
    store failed: then ``FileFailure``, futures open."""
    savepoints = False
    for attempt in range(CONFLICT_TRIES + 1):
        try:
            results = _attempt(conn, schema, jobs, savepoints=savepoints)
        except _StatementFailure as failure:
            if len(jobs) == 1 or savepoints:
                fail_all(jobs, failure.cause)
                return
            savepoints = True  # one job failed: find it, and commit the others
            continue
        except FileFailure as failure:
            if failure.state != "busy" or attempt >= CONFLICT_TRIES - 1:
                raise
            time.sleep(0.05 * 2**attempt)
            continue
        resolve(results)
        return


def _attempt(
    conn: psycopg.Connection[Any], schema: str, jobs: list[Job[Any]], *, savepoints: bool
) -> Results:
    pg = PgConnection(conn, writer_locked=True)
    ran: list[Job[Any]] = []
    results: Results = []
    xid: str | None = None  # set once every statement ran: what fails after it is the COMMIT
    try:
        with conn.transaction():
            conn.execute(cast(Any, f"{set_schema(schema)}; {WRITER_LOCK}"))
            applied = _applied_before(conn, jobs)
            for job in jobs:
                if id(job) in applied:
                    results.append((job, None, None))  # its write is in: resolved, not run
                    continue
                ran.append(job)
                results.append(_run_one(conn, pg, job, savepoint=savepoints))
            keys = [k for j, _, e in results if e is None and (k := key_of(j.fn)) is not None]
            if keys:
                row = conn.execute(cast(Any, BUMP_RECORDING_KEYS), (keys,)).fetchone()
            else:
                row = conn.execute(BUMP_NAMING_XID).fetchone()
            xid = None if row is None else str(row[0])
    except BaseException as exc:
        if isinstance(exc, (FileFailure, _StatementFailure)) or not isinstance(exc, Exception):
            _rolled_back(ran)
            raise
        state = classify(exc)
        if state is not None and xid is not None and conn.closed:
            raise CommitUnknown(state, exc, xid, results) from exc  # hooks wait for settle
        _rolled_back(ran)
        if state is not None:
            raise FileFailure(state, exc) from exc
        raise _StatementFailure(exc) from exc  # the schema's own statements: every job fails
    return results


def _applied_before(conn: psycopg.Connection[Any], jobs: list[Job[Any]]) -> set[int]:
    """The jobs replayed from a journal whose write a transaction already applied (by id)."""
    replayed = {j.fn.key: id(j) for j in jobs if isinstance(j.fn, Op) and j.fn.replayed}
    if not replayed:
        return set()
    found = conn.execute(cast(Any, DELIVERED), (list(replayed),)).fetchall()
    return {replayed[int(r[0])] for r in found}


def _rolled_back(ran: list[Job[Any]]) -> None:
    for job in ran:
        run_hook(job.on_rollback, job)


def _run_one(
    conn: psycopg.Connection[Any], pg: PgConnection, job: Job[Any], *, savepoint: bool
) -> tuple[Job[Any], Any, BaseException | None]:
    try:
        if not savepoint:
            return job, job.fn(pg), None  # type: ignore[arg-type]
        with conn.transaction():  # a savepoint: rolled back alone when the job fails
            value = job.fn(pg)  # type: ignore[arg-type]
    except Exception as exc:
        state = classify(exc)
        if state is not None:
            raise FileFailure(state, exc) from exc
        if not savepoint:
            raise _StatementFailure(exc) from exc
        return job, None, exc
    return job, value, None
