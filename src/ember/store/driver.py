"""The one SQLite library of the process, and the one connection policy.

Every connection ember opens to any database goes through ``connect`` here. Why it matters:
SQLite coordinates the connections of one process through a table of open files kept inside
the library, because POSIX locks never conflict within a process. Two copies of the library in
one process (the stdlib ``sqlite3`` linked against the system's libsqlite3, and ``sqlean``
with its own statically linked copy) each keep their own table, so a connection from each can
hold the write lock at the same time. Both then append frames at the same place in the WAL:
one transaction silently overwrites the other (accounting rows lost with no gap in ids) and
page sets from two writers interleave (``database disk image is malformed``). That is how
project databases corrupt under several agents; ``tests/store/test_driver.py`` reproduces it.

``sqlean.py`` is used because it is the DB-API ``sqlite3`` module built against a recent SQLite
that can load extensions (sqlite-vec) and has FTS5; the stdlib module of many Python builds
cannot load extensions. If ``sqlean`` is missing the stdlib module is used — still one
library per process, just without sqlite-vec. The stdlib module is imported for type names
only (``TYPE_CHECKING``), never at run time.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from ember.fsutil import PRIVATE_FILE, private_dirs

if TYPE_CHECKING:
    from sqlite3 import Connection, Row
else:
    Connection = Any
    Row = Any

log = logging.getLogger(__name__)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Connection",
    "Row",
    "complete_statement",
    "connect",
    "driver",
    "driver_name",
    "errors",
    "guard",
    "vec_status",
]

#: How long a connection waits for another process's write lock before SQLITE_BUSY.
BUSY_TIMEOUT_MS = 5000


def _load() -> ModuleType:
    try:
        import sqlean  # type: ignore[import-untyped]

        return cast(ModuleType, sqlean)
    except ImportError:  # pragma: no cover - sqlean.py is a dependency; kept for odd platforms
        return importlib.import_module("sqlite3")


_DRIVER = _load()


def driver() -> ModuleType:
    """The DB-API module every connection of this process uses."""
    return _DRIVER


def driver_name() -> str:
    return f"{_DRIVER.__name__} (SQLite {_DRIVER.sqlite_version})"


@dataclass(frozen=True)
class Errors:
    """The driver's exception classes (``sqlean.Error`` is not ``sqlite3.Error``)."""

    Error: type[Exception]
    DatabaseError: type[Exception]
    OperationalError: type[Exception]
    IntegrityError: type[Exception]


errors = Errors(
    _DRIVER.Error, _DRIVER.DatabaseError, _DRIVER.OperationalError, _DRIVER.IntegrityError
)


def complete_statement(sql: str) -> bool:
    return bool(_DRIVER.complete_statement(sql))


def _vec_extension() -> str | None:
    """Where sqlite-vec's loadable extension is, found without importing its Python package:
    that package imports the stdlib ``sqlite3`` (for a type hint), which would load a second
    SQLite library into the process."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for name in ("vec0.so", "vec0.dylib", "vec0.dll"):
            if (Path(folder) / name).is_file():
                return str(Path(folder) / "vec0")
    return None


def _load_vec(conn: Connection) -> str | None:
    """Load sqlite-vec into ``conn``; None on success, else why it failed."""
    where = _vec_extension()
    if where is None:
        return "the sqlite-vec package is not installed"
    try:
        conn.enable_load_extension(True)
        conn.load_extension(where)
        conn.enable_load_extension(False)
        conn.execute("SELECT vec_version()").fetchone()
    except (AttributeError, errors.Error) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def vec_status() -> str | None:
    """None when sqlite-vec loads into this library, else why it cannot."""
    conn = _DRIVER.connect(":memory:")
    try:
        return _load_vec(conn)
    finally:
        conn.close()


@dataclass
class Opened:
    conn: Connection
    #: None when sqlite-vec loaded (or was not asked for), else why it could not
    vec_problem: str | None


def connect(
    path: Path, *, readonly: bool = False, vec: bool = False, create: bool = True
) -> Opened:
    """Open ``path`` with the one policy: WAL, ``synchronous=NORMAL`` (a commit survives a
    process crash; only a power loss can take the last commits), a busy timeout so another
    process's writer is waited for instead of failing at once, foreign keys on, autocommit
    (``isolation_level=None``: transactions are explicit, never opened behind our back).

    ``readonly`` connections open the file read-only (and are ``query_only``): a bug cannot
    write through a reader, and a reader never checkpoints — closing the last connection to a
    WAL file copies its WAL into the main file, which only the writer may decide to do, after
    the file was checked (``writerloop.py``: a damaged WAL must not be copied over the file).
    Raises the driver's ``Error`` (callers classify it, see ``health``).
    """
    if create and not readonly:
        _create_private(path)
    target, uri = (f"{path.resolve().as_uri()}?mode=ro", True) if readonly else (str(path), False)
    conn = _DRIVER.connect(target, uri=uri, check_same_thread=False, isolation_level=None)
    try:
        conn.row_factory = _DRIVER.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("%s: journal_mode is %s, not wal", path, mode)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        problem = _load_vec(conn) if vec else None
        if readonly:
            conn.execute("PRAGMA query_only=ON")
    except BaseException:
        conn.close()
        raise
    return Opened(cast("Connection", conn), problem)


def _create_private(path: Path) -> None:
    """Create the database file 0600 (in 0700 folders) before SQLite does: SQLite makes a
    new file 0644 and gives its WAL and shared-memory files the database's own mode, so the
    transcripts in them were readable by every local user. An existing file keeps its mode
    (``ember.store.private`` tightens a home's once)."""
    if path.exists():
        return
    private_dirs(path.parent)
    # made meanwhile by another process, or not creatable: SQLite's own open says why, as
    # the error its callers classify
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))


def guard(path: Path) -> Connection | None:
    """A connection opened read-only at the file level, holding the file's shared lock.

    Closing the last connection to a WAL database checkpoints: it copies the WAL's frames into
    the main file. When the WAL holds damage (garbage written over frames), that copy makes the
    damage permanent — left alone, the next opener rebuilds the WAL index, checks every frame's
    checksum and stops before the first bad one, which leaves the file as it was at the last
    good commit. While this guard is open no other connection of the process can checkpoint on
    close (the checkpoint needs an exclusive lock), and the guard itself never checkpoints (it
    cannot write). None when the file cannot be opened at all.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = _DRIVER.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    except errors.Error:
        return None
    # Any read takes the shared lock, which a WAL connection keeps while it is open (a read
    # that fails may still have taken it; either way the guard never writes).
    with contextlib.suppress(errors.Error):
        conn.execute("PRAGMA page_count").fetchone()
    return cast("Connection", conn)
