"""Opening a project's memory connection: the one place that picks the SQLite driver.

The stdlib ``sqlite3`` of many Python builds (this one included) cannot load extensions, so
sqlite-vec could never load through it. ``sqlean.py`` is the same DB-API module compiled
against a recent SQLite with extension loading and FTS5 enabled, with wheels for Linux,
macOS and Windows; it is used when importable, the stdlib module otherwise. (``apsw`` also
loads extensions but has a different API; ``pysqlite3-binary`` ships Linux wheels only.)

The accounting writer keeps using stdlib ``sqlite3`` on the same file: both speak the same
file format and WAL, and a stdlib connection only fails if it touches the ``vec0`` table,
which it never does.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal, cast

from ember.memory.errors import MemoryStoreError, VectorIndexUnavailable
from ember.memory.store.schema import MEMORY_MIGRATIONS
from ember.store.db import migrate

log = logging.getLogger(__name__)

IndexChoice = Literal["auto", "sqlite-vec", "hnsw"]


def _driver() -> ModuleType:
    try:
        import sqlean  # type: ignore[import-untyped]

        return cast(ModuleType, sqlean)
    except ImportError:  # pragma: no cover - sqlean.py is a dependency; kept for odd platforms
        return sqlite3


def db_errors() -> tuple[type[BaseException], ...]:
    """The exception bases of every driver in use (sqlean's Error is not sqlite3's)."""
    driver = _driver()
    return (sqlite3.Error,) if driver is sqlite3 else (sqlite3.Error, driver.Error)


@dataclass
class MemoryConnection:
    """An open memory database and what could be loaded into it."""

    conn: sqlite3.Connection  # structurally; may be a sqlean connection
    path: Path
    vec_loaded: bool
    driver: str


def _load_vec(conn: sqlite3.Connection) -> str | None:
    """Load sqlite-vec; returns None on success, else why it failed."""
    caught: tuple[type[BaseException], ...] = (ImportError, AttributeError, *db_errors())
    try:
        import sqlite_vec  # type: ignore[import-untyped]

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        conn.execute("SELECT vec_version()").fetchone()
    except caught as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def open_memory_db(path: Path, index: IndexChoice = "auto") -> MemoryConnection:
    """Open (creating) ``path`` in WAL mode, load sqlite-vec as ``index`` asks, migrate.

    ``index="sqlite-vec"`` fails (``VectorIndexUnavailable``) when the extension cannot load,
    rather than quietly running another index the user did not choose; ``auto`` falls back to
    hnsw with a warning; ``hnsw`` never loads the extension (also how tests force the fallback).
    """
    driver = _driver()
    errors = db_errors()
    open_errors: tuple[type[BaseException], ...] = (OSError, *errors)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = cast(
            sqlite3.Connection,
            driver.connect(str(path), check_same_thread=False, isolation_level=None),
        )
        conn.row_factory = driver.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA foreign_keys=ON")
    except open_errors as exc:
        raise MemoryStoreError(f"cannot open memory database {path}: {exc}") from exc
    vec_loaded = False
    if index != "hnsw":
        problem = _load_vec(conn)
        vec_loaded = problem is None
        if problem and index == "sqlite-vec":
            conn.close()
            raise VectorIndexUnavailable(
                f"memory_vector_index is 'sqlite-vec' but the extension cannot load ({problem}); "
                "install sqlite-vec and sqlean.py, or set EMBER_MEMORY_VECTOR_INDEX=auto"
            )
        if problem:
            log.warning("sqlite-vec unavailable (%s); hnswlib index for %s", problem, path)
    try:
        migrate(conn, MEMORY_MIGRATIONS)
    except errors as exc:
        conn.close()
        raise MemoryStoreError(f"cannot migrate memory database {path}: {exc}") from exc
    return MemoryConnection(conn, path, vec_loaded, driver.__name__)
