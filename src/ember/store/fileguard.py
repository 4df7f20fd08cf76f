"""A database's files seen from outside its writer's connection: the owner lock, the WAL, damage.

What an owner (``store.database``) and ``ember doctor`` need to know of a file without trusting
a connection that has been writing to it:
- *Who has it open.* An owner holds a shared ``flock`` on ``<file>.lock`` while the file is
  open (``lock_shared``/``unlock``); ``in_use`` takes it exclusively, without waiting, to
  tell. ``ember doctor --recover`` asks before it swaps a file, so it never moves a file a
  proxy is writing. Best effort: without ``fcntl`` (windows) nothing is locked and
  ``in_use`` always says no — there, the doctor cannot tell.
- *What a stopped process left in the WAL* (``left_wal``): read before SQLite's own recovery
  runs — that recovery stops silently at the first frame whose checksum fails, and the next
  commits overwrite the frames after it. Only a WAL whose file no owner has open (``in_use``:
  a live WAL belongs to its writer and changes as it is read), and no larger than
  ``WAL_READ_BYTES``.
- *Whether the file on disk is damaged* (``quick_check``): always on a fresh connection, since
  a writer's page cache still holds the pages it wrote, whatever the disk now has.

Nothing here keeps state or writes to the database file: every function may run beside a
live owner.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ember.errors import StorageError
from ember.fsutil import PRIVATE_FILE
from ember.store.driver import connect, errors
from ember.store.health import classify
from ember.store.pages import WalScan, read_wal
from ember.store.writer import FileFailure

try:  # POSIX; elsewhere the owner lock is skipped (doctor then cannot tell)
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]

#: A WAL left behind by a stopped process is read frame by frame at the first open when it is
#: no larger than this (about a second of checksums; a larger one is left to SQLite's own
#: recovery). The writer keeps its WAL below ``WAL_CHECK_BYTES``, so one it left always is.
WAL_READ_BYTES = 24 * 1024 * 1024


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def lock_shared(path: Path) -> int | None:
    """Hold a shared lock on ``<file>.lock`` while the file is open (best effort)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def unlock(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def in_use(path: Path) -> bool:
    """Whether some process (a proxy, a CLI command) has ``path`` open as its owner."""
    if fcntl is None or not lock_path(path).exists():
        return False
    fd = os.open(lock_path(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def wal_bytes(path: Path) -> int:
    try:
        return os.stat(str(path) + "-wal").st_size
    except OSError:
        return 0


def left_wal(path: Path) -> WalScan | None:
    """The WAL a stopped process left beside ``path``, read frame by frame; None when there is
    nothing left behind, it is too large to read here, or some process has the file open (the
    WAL is live)."""
    wal = Path(str(path) + "-wal")
    try:
        size = wal.stat().st_size
    except OSError:
        return None
    if size <= 32 or size > WAL_READ_BYTES or in_use(path):
        return None
    try:
        return read_wal(wal.read_bytes())
    except OSError:
        return None


def quick_check(path: Path) -> None:
    """Raise ``FileFailure`` when ``PRAGMA quick_check`` finds damage in ``path`` as it is on
    disk (a fresh connection: a writer's page cache still holds the pages it wrote)."""
    try:
        fresh = connect(path, readonly=True).conn
    except errors.Error as exc:
        state = classify(exc)
        if state == "corrupt":
            raise FileFailure(state, exc) from exc
        return  # cannot look now (busy, I/O): the writes themselves will tell
    try:
        found = [str(r[0]) for r in fresh.execute("PRAGMA quick_check(3)")]
    except errors.Error as exc:
        if classify(exc) == "corrupt":
            raise FileFailure("corrupt", exc) from exc
        return
    finally:
        fresh.close()
    if found != ["ok"]:
        raise FileFailure("corrupt", StorageError("quick_check: " + "; ".join(found)))
