"""What output shaping keeps, as three JSON documents in rows of the home's ``stats.db`` (on
a PostgreSQL store, ``store_url``: the same rows in its ``ember_home`` schema).

- ``verbosity``: ``{"level": int, "baseline": {stratum: [n, mean, m2]}, ...}``. The learned
  level and the unshaped baseline. Written by ``ember learn --verbosity`` and by the recorder
  (it adds what unshaped traffic produced while shaping was off); every writer keeps the keys
  it does not own.
- ``ledger``: the savings ledger (``savings.Ledger``), shared by every proxy.
- ``controller``: the AIMD controller's state (``controller.ControllerState``).

A change is a read-modify-write inside one write transaction of the database's owner
(``update``): several proxies sharing ``$EMBER_HOME`` add up instead of overwriting each other,
as the advisory lock over three files did before — and shaping's state is now kept, checked,
backed up and recovered with the rest (``ember doctor``), not in a second kind of storage.

Before this, the documents were files under ``$EMBER_HOME/shaping/``. Each is read once into
its row, the first time a writer needs it, and kept beside as ``<file>.bak``; a file that is
not JSON is set aside as ``<file>.bad-<time>`` (kept for inspection) and its row starts
afresh. Until a writer has run, readers fall back to the file, so a report never shows less
than it did before an upgrade.

Savings hold token counts only (no prompts, no answers, no project names), so one place for
all projects leaks nothing across projects.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ember.shaping.controller import ControllerState
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.migrations import Migration
from ember.store.sql import one_writer

__all__ = ["SHAPING", "ShapingState", "learned_level", "load_controller", "save_controller"]

log = logging.getLogger(__name__)

Name = Literal["verbosity", "ledger", "controller"]
#: The file each document was kept in before it moved into the database.
LEGACY_FILES: dict[Name, str] = {
    "verbosity": "verbosity.json",
    "ledger": "output_savings.json",
    "controller": "controller.json",
}

SHAPING: tuple[Migration, ...] = (
    Migration(
        "shaping_0001_state",
        """
        CREATE TABLE shaping_state (
            name TEXT PRIMARY KEY CHECK (name IN ('verbosity', 'ledger', 'controller')),
            doc TEXT NOT NULL CHECK (json_valid(doc)),
            updated_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        # ``IS JSON`` (any JSON value, as json_valid): false, not an error, for other text
        postgres="""
        CREATE TABLE shaping_state (
            name TEXT PRIMARY KEY CHECK (name IN ('verbosity', 'ledger', 'controller')),
            doc TEXT NOT NULL CHECK (doc IS JSON),
            updated_at DOUBLE PRECISION NOT NULL
        );
        """,
    ),
)


class ShapingState:
    """The three documents of one home. ``database`` opens the home's ``stats.db`` (its one
    owner in this process); None, or a function that returns None, reads the old files only
    and cannot write (a report run where ``stats.db`` does not exist yet: a read creates
    nothing; a stage before it was started)."""

    def __init__(
        self,
        home: Path,
        database: Callable[[], Database | None] | None,
        *,
        kept_in: str | None = None,
    ) -> None:
        """``kept_in``: where the documents are, for messages (the home's stats.db unless
        said: a PostgreSQL store names its schema, never the URL's password)."""
        self.home = home
        self._database = database
        self._kept_in = kept_in if kept_in is not None else str(home / "stats.db")
        self._adopted: set[Name] = set()

    @property
    def directory(self) -> Path:
        """Where the old files were (and their ``.bak`` copies are)."""
        return self.home / "shaping"

    def legacy(self, name: Name) -> Path:
        return self.directory / LEGACY_FILES[name]

    def where(self, name: Name) -> str:
        """Where ``name`` is kept, for messages."""
        return f"{self._kept_in} (shaping_state '{name}')"

    def read(self, name: Name) -> Any:
        """The document (None when there is none); raises ``ValueError`` naming an old file
        that is not JSON, when no row replaced it yet."""
        db = self._database() if self._database is not None else None
        if db is not None:
            found = db.read(lambda c: _row(c, name))
            if found is not None:
                return found
        return _read_file(self.legacy(name))

    def update(self, name: Name, change: Callable[[Any], Any], *, retried: bool = False) -> Any:
        """Replace the document with ``change(current)`` in one write transaction (current:
        None when there is none; ``change`` returning None writes nothing); returns it.
        ``retried``: the caller keeps the change and tries again when the write is refused
        (``Database.submit``), so a refusal is not counted as a lost write."""
        db = self._writer()
        self._adopt(db, name)

        def job(conn: Connection) -> Any:
            one_writer(conn)  # proxies sharing a PostgreSQL store add up, as on SQLite
            new = change(_row(conn, name))
            if new is not None:
                _put(conn, name, new)
            return new

        return db.write(job, label="shaping", retried=retried)

    def lost(self, n: int) -> None:
        """Count ``n`` shaping writes the caller kept and now gives up (a stop while the
        database is off) as lost, in the database's health; nothing without a database."""
        db = self._database() if self._database is not None else None
        if db is not None:
            db.lost("shaping", n)

    def _writer(self) -> Database:
        db = self._database() if self._database is not None else None
        if db is None:
            raise RuntimeError("this ShapingState reads only (no database)")
        return db

    def _adopt(self, db: Database, name: Name) -> None:
        """Read the old file into its row once (kept as ``.bak``), unless a row is there."""
        if name in self._adopted:
            return
        path = self.legacy(name)
        try:
            doc = _read_file(path)
        except ValueError as exc:
            set_aside(path, str(exc))
            doc = None
        if doc is not None:
            db.write(lambda c: _put(c, name, doc, replace=False), label="shaping")
            with contextlib.suppress(FileNotFoundError):  # another proxy moved it first
                os.replace(path, path.with_name(path.name + ".bak"))
            log.info("shaping: %s moved into %s; kept as %s.bak", path, self.where(name), path)
        self._adopted.add(name)


def _row(conn: Connection, name: str) -> Any:
    row = conn.execute("SELECT doc FROM shaping_state WHERE name = ?", (name,)).fetchone()
    return json.loads(row[0]) if row is not None else None


def _put(conn: Connection, name: str, doc: Any, *, replace: bool = True) -> None:
    """Write the row (``replace`` False: only when there is none, the adoption of an old
    file never overwriting what a proxy wrote). ``ON CONFLICT``, not ``INSERT OR ...``:
    one statement SQLite and PostgreSQL both run."""
    on_conflict = (
        "DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at"
        if replace
        else "DO NOTHING"
    )
    conn.execute(
        "INSERT INTO shaping_state (name, doc, updated_at) VALUES (?, ?, ?) "
        f"ON CONFLICT (name) {on_conflict}",
        (name, json.dumps(doc, separators=(",", ":")), time.time()),
    )


def _read_file(path: Path) -> Any:
    """The parsed content of ``path``; None when it does not exist. Raises ``ValueError``
    when it exists but is not JSON."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def set_aside(path: Path, reason: str) -> Path:
    """Move an unreadable file out of the way (kept for inspection) and say so."""
    target = path.with_name(f"{path.name}.bad-{int(time.time())}")
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, target)
    log.warning("%s was unreadable (%s); kept as %s and started afresh", path, reason, target)
    return target


def learned_level(data: Any) -> int | None:
    """The ``level`` of a ``verbosity`` document, when it is an int."""
    level = data.get("level") if isinstance(data, dict) else None
    return level if isinstance(level, int) and not isinstance(level, bool) else None


def load_controller(state: ShapingState) -> ControllerState | None:
    """The saved controller state; None when absent or unreadable (logged, kept). Raises
    ``StorageUnavailable`` when the store cannot be reached now (a PostgreSQL server down:
    the caller reads it again later; a proxy must start all the same)."""
    try:
        return ControllerState.from_json(state.read("controller"))
    except ValueError as exc:
        log.warning("ignoring the controller state: %s", exc)
        return None


def save_controller(state: ShapingState, controller: ControllerState) -> None:
    """Write the controller state (last writer wins: it is one user's preference, and the
    next observation corrects a lost update)."""
    doc = controller.to_json()
    state.update("controller", lambda _: doc, retried=True)
