"""``EMBER_HOME`` checked before the proxy starts serving (pure checks, plus one probe write).

A home that is a file, read-only or on a full disk used to surface as a traceback on the
first request, or worse, as requests that worked while every accounting and memory write
failed behind them. ``ember proxy`` now refuses to start, with one line saying what is wrong
and how to fix it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from ember.errors import StorageError

#: Below this much free space the proxy refuses to start (SQLite needs room for its WAL).
MIN_FREE_BYTES = 50 * 1024 * 1024


def check_home(home: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """Raise ``StorageError`` (one line, with the fix) unless ``home`` can hold ember's files."""
    where = f"EMBER_HOME {home}"
    if home.exists() and not home.is_dir():
        raise StorageError(f"{where} is a file, not a directory; set EMBER_HOME to a directory")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"{where} cannot be created ({_why(exc)}); {_fix(exc)}") from exc
    _probe(home, where)
    free = shutil.disk_usage(home).free
    if free < min_free:
        raise StorageError(
            f"{where} is on a disk with only {free // (1024 * 1024)} MB free (ember needs at "
            f"least {min_free // (1024 * 1024)} MB); free some space or move EMBER_HOME"
        )


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


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _fix(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space or move EMBER_HOME"
    if exc.errno == errno.EROFS:
        return "it is on a read-only file system; set EMBER_HOME to a writable directory"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "fix its permissions or set EMBER_HOME to a directory you own"
    if exc.errno == errno.ENOTDIR:
        return "a parent of it is a file; set EMBER_HOME to a directory"
    return "set EMBER_HOME to a writable directory"
