"""``Storage``: the databases of one process, one owner per file.

The proxy builds one ``Storage`` and hands it to every stage; a CLI command builds its own.
``database(path)`` is a dictionary lookup (no I/O, so the event loop may call it): the file
is opened by its writer thread on first use. Past ``max_open`` open files the least recently
used idle ones are suspended (closed, reopened on demand), so hundreds of projects never
exhaust file handles — and no reference a feature holds ever goes stale.

Failures are remembered in ``$EMBER_HOME/storage-problems.json`` (best effort, ``problems``),
which ``ember stats`` and ``ember doctor`` read: the proxy reports a damaged database once, in
the log, in ``/healthz`` and to whoever looks next. What was lost stays visible: the file adds
each process's losses to those of the processes before it and of ``ember doctor --recover``.

With a ``store_url`` the same paths name schemas of one PostgreSQL instead of files
(``store.pg``): ``database(path)`` returns a ``PgDatabase`` for the schema the path maps to
(``pg.names``), with the same interface, health and hold limit, and the schema's parts that
run there (``schema.for_postgres``). Nothing is created in ``EMBER_HOME`` for it but
``storage-problems.json`` when a schema is switched off.

One ``HoldLimit`` for the process: the writes every database keeps through a gap (disk full)
count against it together, so many projects on a full disk cannot multiply the memory.

On PostgreSQL, one write journal for the process (``pg.journal``, in ``EMBER_HOME/journal``,
made on the first write that needs it, bounded by ``journal_bytes``): the writes every schema
holds through an outage are on disk, kept through a stop (``close`` says how many) and
delivered by the next start (``deliver_left``).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.store.database import Database
from ember.store.health import Health
from ember.store.hold import HOLD_WRITES, HoldLimit
from ember.store.migrations import Schema
from ember.store.pg.url import conninfo, redacted, require_driver, where
from ember.store.problems import (
    PROBLEMS_FILE,
    Reported,
    clear_problem,
    problems_path,
    read_problems,
)
from ember.store.schema import PROJECT, STATS, for_postgres

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.store.pg.journal import WriteJournal

#: The write journal's bound unless said (``storage_journal_mb``).
JOURNAL_BYTES = 256 * 1_000_000

# Read by commands through this module since before ``problems`` held them.
__all__ = [
    "PROBLEMS_FILE",
    "Storage",
    "clear_problem",
    "problems_path",
    "read_problems",
    "stats_db_path",
    "stats_where",
    "storage_for",
]

log = logging.getLogger(__name__)


def stats_db_path(home: Path) -> Path:
    """Accounting of requests whose project could not be resolved (token counts only)."""
    return home / "stats.db"


def stats_where(home: Path, store_url: str | None) -> str:
    """How the home's own database (``stats_db_path``) is named in messages: the file, or on
    a PostgreSQL store (``store_url``) its home schema on the server, password left out. A
    message naming stats.db sent the user looking for a file that a server store never makes."""
    if store_url is None:
        return str(stats_db_path(home))
    from ember.store.pg.names import HOME_SCHEMA

    return where(HOME_SCHEMA, store_url)


class Storage:
    def __init__(
        self,
        home: Path,
        *,
        vec: bool = True,
        max_open: int = 64,
        idle_seconds: float | None = None,
        hold_writes: int = HOLD_WRITES,
        check_seconds: float | None = None,
        store_url: str | None = None,
        journal_bytes: int = JOURNAL_BYTES,
    ) -> None:
        """``hold_writes``: writes kept in memory while files are off, all databases together
        (0: none, a refused write is dropped and counted at once). ``check_seconds``: how
        often a database being written is checked for damage (``PRAGMA quick_check``; None:
        ``database.CHECK_SECONDS``). ``store_url``: a PostgreSQL URL (already checked,
        ``pg.url.check_store_url``) to keep everything in instead of files.
        ``journal_bytes``: the PostgreSQL write journal's bound (0: no journal, and nothing
        is journaled with ``hold_writes`` 0 either)."""
        if store_url is not None:
            require_driver()
            conninfo(store_url)  # a URL libpq cannot read fails here, not in every write
        self.store_url = store_url
        self.home = home
        self.vec = vec
        self.max_open = max_open
        self._idle = idle_seconds
        self.hold = HoldLimit(hold_writes)
        self._check_seconds = check_seconds
        self._dbs: dict[Path, Database] = {}
        self._lock = threading.Lock()  # guards the dict only; never held across I/O
        self._problems_lock = threading.Lock()
        self._reported = Reported()
        #: ``close`` was called: background work on the files stops (``startcheck``)
        self.closing = False
        self.journal_bytes = journal_bytes
        self._journal: WriteJournal | None = None
        self._journal_tried = False
        self._journal_lock = threading.Lock()

    def database(self, path: Path, schema: Schema = PROJECT) -> Database:
        """The owner of ``path`` (created on first call, opened on first use)."""
        with self._lock:
            db = self._dbs.get(path)
            if db is None:
                db = self._new(path, schema)
                self._dbs[path] = db
            elif db.schema.name != schema.name:
                raise ValueError(f"{path} is a {db.schema.name} database, not {schema.name}")
            db.last_used = time.monotonic()
            crowded = self._crowded()
        for old in crowded:
            old.suspend()
        return db

    def holds(self, path: Path, schema: Schema = PROJECT) -> bool:
        """Whether ``path``'s data exists: the file, or on PostgreSQL the schema the path
        names (no file is ever made there, and a check of the file said "no data" of every
        project). Creates nothing; ``StorageUnavailable`` when the server cannot be reached."""
        if self.store_url is None:
            return path.is_file()
        from ember.store.pg.database import PgDatabase

        db = self.database(path, schema)
        return isinstance(db, PgDatabase) and db.exists()

    @property
    def postgres(self) -> bool:
        """Whether this storage keeps its data in PostgreSQL (``store_url``)."""
        return self.store_url is not None

    def paths(self) -> list[Path]:
        """The path of every database this storage holds for its home: the files under it
        (stats.db, the global store, each project's), or on PostgreSQL each schema the
        server holds under the path it maps back to (nothing is kept in the home there).
        Creates nothing; raises the driver's error when the server cannot be reached."""
        if self.store_url is None:
            from ember.store.inspect import databases

            return [path for path, _ in databases(self.home)]
        from ember.store.pg.catalog import home_paths

        return home_paths(self.store_url, self.home)

    def _new(self, path: Path, schema: Schema) -> Database:
        kw: dict[str, Any] = {} if self._idle is None else {"idle_seconds": self._idle}
        if self.store_url is not None:
            from ember.store.pg.database import PgDatabase
            from ember.store.pg.names import schema_name

            return PgDatabase(
                path,
                for_postgres(schema),
                url=self.store_url,
                schema_name=schema_name(self.home, path),
                on_problem=self._record,
                hold=self.hold,
                journal=self.write_journal,
                **kw,
            )
        return Database(
            path,
            schema,
            vec=self.vec,
            on_problem=self._record,
            hold=self.hold,
            check_seconds=self._check_seconds,
            **kw,
        )

    def stats(self) -> Database:
        return self.database(stats_db_path(self.home), STATS)

    def write_journal(self) -> WriteJournal | None:
        """The process's write journal on a PostgreSQL store (made now if need be); None
        without one (SQLite, nothing held, or it cannot be made: said once)."""
        if self._journal is not None or self._journal_tried:
            return self._journal
        if self.store_url is None or self.journal_bytes <= 0 or self.hold.limit <= 0:
            return None
        from ember.store.journal import journal_dir
        from ember.store.pg.journal import WriteJournal

        with self._journal_lock:
            if not self._journal_tried:
                self._journal_tried = True
                directory = journal_dir(self.home)
                try:
                    self._journal = WriteJournal(
                        directory, redacted(self.store_url), limit=self.journal_bytes
                    )
                except OSError as exc:
                    log.warning(
                        "the write journal cannot be kept in %s (%s): writes held for "
                        "PostgreSQL through an outage stay in memory only",
                        directory,
                        exc,
                    )
        return self._journal

    def deliver_left(self, timeout: float = 60.0) -> int:
        """Deliver what stopped processes left in this home's write journal for this store
        (``pg.deliver``); the number of writes taken on. Nothing on SQLite."""
        if self.store_url is None:
            return 0
        from ember.store.pg.deliver import deliver_left

        return deliver_left(self, timeout)

    def _crowded(self) -> list[Database]:
        """Caller holds the lock: open databases past ``max_open``, least recently used."""
        live = [d for d in self._dbs.values() if d.open]
        if len(live) <= self.max_open:
            return []
        live.sort(key=lambda d: d.last_used)
        return [d for d in live[: len(live) - self.max_open] if d.idle()]

    def problems(self) -> list[Health]:
        """Databases switched off now, or that dropped writes earlier (``/healthz``)."""
        with self._lock:
            dbs = list(self._dbs.values())
        return [h for h in (d.health for d in dbs) if h.reportable]

    def _record(self, health: Health) -> None:
        """A database changed health: keep the file other commands read up to date."""
        with self._problems_lock:
            try:
                self._reported.record(self.home, health)
            except OSError as exc:
                log.warning("could not record the storage problem in %s: %s", self.home, exc)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write of every database is committed."""
        with self._lock:
            dbs = list(self._dbs.values())
        return all(d.flush(timeout) for d in dbs)

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued everywhere, then close every file (shutdown, end of a CLI
        command)."""
        self.closing = True
        with self._lock:
            dbs = list(self._dbs.values())
        for d in dbs:
            d.close(timeout)
        journal = self._journal
        if journal is not None:
            kept = journal.close()
            if kept and self.store_url is not None:
                log.warning(
                    "PostgreSQL at %s was not reachable at the stop: %d writes are kept in "
                    "%s; the next proxy started on this EMBER_HOME delivers them",
                    redacted(self.store_url),
                    kept,
                    journal.directory,
                )


def storage_for(settings: Settings) -> Storage:
    """The one owner of every database file a process opens, as its settings ask."""
    return Storage(
        settings.home,
        vec=settings.memory_vector_index != "hnsw",
        hold_writes=settings.storage_hold_writes,
        check_seconds=settings.storage_check_seconds,
        store_url=settings.store_url,
        journal_bytes=settings.storage_journal_mb * 1_000_000,
    )
