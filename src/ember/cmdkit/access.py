"""How a one-shot command reaches a database in ``EMBER_HOME``.

Every command that reads or writes a database goes through here, so three failures a new
user met in their first hour cannot come back one command at a time:

- a read (``memory list``, ``stats``, ``shadow runs``...) creating a project folder and an
  empty database for a project ember never saw: ``existing`` creates nothing and says in one
  line that the project has no ember data yet;
- an unusable home (a file, a folder without permission, an unreadable database) ending in a
  traceback, or in "No sessions recorded" with exit 0: the checks of ``ember.store.home``
  run first and raise one line with the fix;
- the proxy's advice "ember retries on its own" printed by a command that ran once:
  ``database`` and ``one_shot`` word a file-level failure for a command that runs once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ember.errors import EmberError, StorageError
from ember.store.database import Database
from ember.store.health import ON_POSTGRES, Health, State, classify
from ember.store.home import check_folders, check_readable, check_writable
from ember.store.migrations import Schema

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.store.pg.database import PgDatabase
    from ember.store.registry import Storage


def no_data(path: Path, what: str = "This project") -> str:
    """The one line a read prints for a project (or the home) with nothing recorded yet."""
    return f"{what} has no ember data yet: {path} does not exist (nothing was created)."


def folders(home: Path, path: Path) -> bool:
    """Whether the folders down to the file ``path`` (a JSON file, a ledger) exist; raises
    ``StorageError`` when the home or a folder on the way is a file."""
    return check_folders(home, path)


def existing(home: Path, path: Path) -> bool:
    """Whether the database ``path`` exists (False: no data yet, and nothing was created);
    raises ``StorageError`` when the home or the file cannot be used."""
    return check_readable(home, path)


def stored(storage: Storage, path: Path, schema: Schema) -> bool:
    """Whether ``path``'s data exists where ``storage`` keeps it: the file, or on PostgreSQL
    (``store_url``) the schema the path names. A check of the file alone said "no data yet"
    of every project on PostgreSQL, where no file is ever made. Creates nothing."""
    if storage.postgres:
        return storage.holds(path, schema)
    return existing(storage.home, path)


def writable(home: Path, path: Path) -> None:
    """Raise ``StorageError`` unless ``path`` can be written (creates its folder)."""
    check_writable(home, path)


@contextmanager
def database(path: Path, schema: Schema, *, vec: bool = False) -> Iterator[Database]:
    """A short-lived owner of ``path``, closed on leaving; a file-level failure inside the
    block is raised as one line with a fix for a one-shot command (``one_shot``). The caller
    has checked the file first (``existing`` or ``writable``)."""
    with _short_lived(Database(path, schema, vec=vec, log_failures=False), path) as db:
        yield db


@contextmanager
def kept(settings: Settings, path: Path, schema: Schema) -> Iterator[tuple[Database | None, str]]:
    """A short-lived owner of ``path``'s data where ``settings`` keep it — its schema when
    ``store_url`` is set, else its file — and how it is named; the owner is None while there
    is none yet (a read creates nothing: no file, no schema). An unusable home, file or
    server is one line with the fix."""
    if settings.store_url is not None:
        with pg_database(settings, path, schema) as pg:
            yield (pg if pg.exists() else None), pg.where
        return
    if not existing(settings.home, path):
        yield None, str(path)
        return
    with database(path, schema) as db:
        yield db, str(path)


@contextmanager
def pg_database(settings: Settings, path: Path, schema: Schema) -> Iterator[PgDatabase]:
    """A short-lived owner of the PostgreSQL schema ``path`` maps to (``store_url``), closed
    on leaving; an unreachable server is one line with a fix for a one-shot command. The
    schema is not created until the block reads or writes (``PgDatabase.exists`` first)."""
    from ember.store.pg.database import PgDatabase
    from ember.store.pg.names import schema_name
    from ember.store.schema import for_postgres

    assert settings.store_url is not None
    db = PgDatabase(
        path,
        for_postgres(schema),
        url=settings.store_url,
        schema_name=schema_name(settings.home, path),
        log_failures=False,
    )
    with _short_lived(db, db.where) as owned:
        yield owned


@contextmanager
def one_shot(path: Path) -> Iterator[None]:
    """Re-raise a storage failure about the file itself (damaged, unwritable, full, I/O,
    locked) as a ``StorageError`` whose fix suits a command that runs once: the proxy's
    wording ("ember retries on its own") is true of a server, never of a command."""
    try:
        yield
    except Exception as exc:
        reworded = _reworded(exc, path, None)
        if reworded is None:
            raise
        raise reworded from exc


D = TypeVar("D", Database, "PgDatabase")


@contextmanager
def _short_lived(db: D, where: Path | str) -> Iterator[D]:
    """``db`` for one block, closed on leaving; a storage failure inside it raised again as
    one line naming ``where`` with its fix (``_reworded``), anything else as it was."""
    try:
        yield db
    except Exception as exc:
        reworded = _reworded(exc, where, db.health)
        if reworded is None:
            raise
        raise reworded from exc
    finally:
        db.close()


def _reworded(exc: BaseException, path: Path | str, health: Health | None) -> StorageError | None:
    found = _file_failure(exc)
    if found is None and health is not None and not health.ok:
        found = health.state, health.detail
    if found is None:
        return None
    state, detail = found
    words = _PG_ONE_SHOT if str(path).startswith(ON_POSTGRES) else _ONE_SHOT
    return StorageError(f"{path} {words[state].format(detail=detail, path=path)}")


def _file_failure(exc: BaseException) -> tuple[State, str] | None:
    """The file-level state the deepest recognisable cause of ``exc`` shows, with its words.
    ember's own errors are passed over: they repeat the cause with advice for the proxy."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__
    for cause in reversed(chain):
        state = None if isinstance(cause, EmberError) else classify(cause)
        if state is not None and state != "ok":
            return state, str(cause)
    return None


_ONE_SHOT: dict[State, str] = {
    "ok": "({detail})",
    "corrupt": "is damaged ({detail}); stop the proxy and run `ember doctor --recover --db "
    "{path}` (the damaged file is kept beside the new one)",
    "unwritable": "cannot be opened for writing ({detail}); ember writes beside a database even "
    "to read it (lock and journal files): make the file and its folder writable by this user, "
    "or set EMBER_HOME to a directory you own, then run `ember doctor`",
    "full": "cannot grow: the disk is full ({detail}); free some space or move EMBER_HOME, then "
    "run the command again (`ember doctor` checks the free space)",
    "ioerr": "hit a disk I/O error ({detail}); check the disk (dmesg), then `ember doctor --db "
    "{path}`",
    "busy": "is locked by another process ({detail}); run the command again once it is done "
    "(`fuser {path}` names it; `ember doctor --db {path}` says whether ember has it open)",
    "unreachable": "cannot be reached ({detail}); check that the PostgreSQL server of store_url "
    "is running and reachable from here, then run the command again (`ember doctor` checks "
    "the server)",
}

#: The same for a schema of a PostgreSQL store: the server's and the role's problems, never
#: a file's (there is none to make writable).
_PG_ONE_SHOT: dict[State, str] = {
    **_ONE_SHOT,
    "corrupt": "failed ({detail}); `ember doctor` checks the server",
    "unwritable": "may not be written by the role of store_url ({detail}); `ember store init "
    "URL` prints the SQL a database administrator runs to grant it, or point store_url at "
    "the primary if this server is a read-only standby, then run the command again",
    "full": "cannot grow: the server's disk is full ({detail}); its administrator must free "
    "space, then run the command again",
    "ioerr": "hit an I/O error on the server ({detail}); see the server's log, then run the "
    "command again (`ember doctor` checks the server)",
    "busy": "is busy on the server ({detail}: too many connections, or a lock held); run the "
    "command again once it is free",
}
