"""``EMBER_HOME`` checked before it is used (pure checks, plus one probe write).

A home that is a file, read-only or on a full disk used to surface as a traceback on the
first request, or worse, as requests that worked while every accounting and memory write
failed behind them. ``ember proxy`` now refuses to start, with one line saying what is wrong
and how to fix it (``check_home``).

The one-shot commands check the database they are about to use the same way:
``check_readable`` before a read (it creates nothing, and tells "no data yet" apart from "the
home cannot be used"), ``check_writable`` before a write.

Each check also keeps the home private to the user: what it creates is 0700, and an existing
home is tightened once per process (``ember.store.private``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ember.errors import StorageError
from ember.fsutil import private_dirs
from ember.store.private import keep_private

#: How every message about ember's files ends (README: "When something is wrong").
_DOCTOR = "then run `ember doctor`"
_HOME_IS_A_FILE = f"set EMBER_HOME to a directory, {_DOCTOR}"

#: Below this much free space the proxy refuses to start (SQLite needs room for its WAL).
MIN_FREE_BYTES = 50 * 1024 * 1024


def check_home(home: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """Raise ``StorageError`` (one line, with the fix) unless ``home`` can hold ember's files."""
    where = f"EMBER_HOME {home}"
    if home.exists() and not home.is_dir():
        raise StorageError(f"{where} is a file, not a directory; {_HOME_IS_A_FILE}")
    try:
        private_dirs(home)
    except OSError as exc:
        raise StorageError(f"{where} cannot be created ({_why(exc)}); {_fix(exc)}") from exc
    _probe(home, where)
    free = shutil.disk_usage(home).free
    if free < min_free:
        raise StorageError(
            f"{where} is on a disk with only {free // (1024 * 1024)} MB free (ember needs at "
            f"least {min_free // (1024 * 1024)} MB); free some space or move EMBER_HOME, {_DOCTOR}"
        )
    keep_private(home)


def check_folders(home: Path, path: Path) -> bool:
    """Whether the folders from ``home`` down to ``path``'s own all exist; creates nothing.

    False: one is missing (nothing was recorded there yet). Raises ``StorageError`` (one
    line, with the fix) when one of them is a file: a read used to take that for "no file"
    and report "No sessions recorded" with exit 0, or end in a NotADirectoryError traceback."""
    for folder in (home, *_folders_between(home, path)):
        mode = _mode(folder)
        if mode is None:
            return False
        if not stat.S_ISDIR(mode):
            raise StorageError(_not_a_folder(home, folder))
    return True


def check_readable(home: Path, db: Path) -> bool:
    """Whether the database ``db`` (a file under ``home``) exists; creates nothing.

    False: nothing was recorded there yet (a fresh home, a project ember has not seen).
    Raises ``StorageError`` (one line, with the fix) when the home or the file cannot be
    used (``check_folders``), or the database is not a file, cannot be opened, or is not
    SQLite at all: a read used to end in a traceback or in SQLite's own words."""
    keep_private(home)
    mode = _mode(db) if check_folders(home, db) else None
    if mode is None:
        return False
    if not stat.S_ISREG(mode):
        raise StorageError(
            f"{db} is not a file; move it away (ember recreates the database), {_DOCTOR}"
        )
    try:
        with db.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StorageError(f"{db} cannot be read ({_why(exc)}); {_fix(exc)}") from exc
    if header and header != SQLITE_HEADER:
        raise StorageError(
            f"{db} is not a SQLite database (damaged or overwritten); run `ember doctor "
            f"--recover --db {db}` (the file is kept beside the new one)"
        )
    return True


def check_writable(home: Path, path: Path) -> None:
    """Raise ``StorageError`` (one line, with the fix) unless the file ``path`` under ``home``
    (a database, a JSON file) can be created or written; creates the home and the file's
    folder, as the write would. A write used to fail with SQLite's "attempt to write a
    readonly database" and the proxy's "ember retries on its own", which a command that ran
    once never does."""
    check_home(home, min_free=0)  # the probe still catches a full disk
    for folder in _folders_between(home, path):
        mode = _mode(folder)
        if mode is not None and not stat.S_ISDIR(mode):
            raise StorageError(_not_a_folder(home, folder))
    try:
        private_dirs(path.parent)
    except OSError as exc:
        raise StorageError(f"{path.parent} cannot be created ({_why(exc)}); {_fix(exc)}") from exc
    _probe(path.parent, str(path.parent))
    if path.is_file():
        try:
            with path.open("r+b"):
                pass
        except OSError as exc:
            raise StorageError(f"{path} cannot be written ({_why(exc)}); {_fix(exc)}") from exc


#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def _folders_between(home: Path, path: Path) -> list[Path]:
    """The folders from ``home`` (excluded) down to ``path``'s own folder (a file given
    outside ``home``, with ``--db``: its own folder only)."""
    try:
        parts = path.parent.relative_to(home).parts
    except ValueError:
        return [path.parent]
    return [home.joinpath(*parts[: i + 1]) for i in range(len(parts))]


def _mode(path: Path) -> int | None:
    """``path``'s file mode, None when nothing is there; a folder on the way that cannot be
    searched is a ``StorageError`` (``Path.exists`` raises on it, a traceback before)."""
    try:
        return path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StorageError(f"{path} cannot be read ({_why(exc)}); {_fix(exc)}") from exc


def _not_a_folder(home: Path, path: Path) -> str:
    if path == home:
        return f"EMBER_HOME {home} is a file, not a directory; {_HOME_IS_A_FILE}"
    return f"{path} is a file where ember keeps a folder; move it away (`ember doctor` checks)"


def _probe(home: Path, where: str) -> None:
    """Write, sync and remove a small file: catches read-only mounts, permissions and ENOSPC
    that ``os.access`` would not (root passes every permission check)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ember-probe-", dir=home)
    except OSError as exc:
        raise StorageError(f"{where} is not writable ({_why(exc)}); {_fix(exc)}") from exc
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    except OSError as exc:
        raise StorageError(f"{where} is not writable ({_why(exc)}); {_fix(exc)}") from exc
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)


def describe_os_error(exc: OSError) -> str:
    """One line for a file-system failure no check foresaw — the file may be EMBER_HOME's or
    one the command was given, so the line names it and where to look, and guesses no fix."""
    where = exc.filename or "a file"
    look = "for a file under EMBER_HOME, `ember doctor` says what to fix"
    return f"cannot use {where} ({_why(exc)}); {look}"


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _fix(exc: OSError) -> str:
    return f"{_fix_of(exc)}, {_DOCTOR}"


def _fix_of(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space or move EMBER_HOME"
    if exc.errno == errno.EROFS:
        return "it is on a read-only file system; set EMBER_HOME to a writable directory"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "fix its permissions or set EMBER_HOME to a directory you own"
    if exc.errno == errno.ENOTDIR:
        return "a parent of it is a file; set EMBER_HOME to a directory"
    return "set EMBER_HOME to a writable directory"
