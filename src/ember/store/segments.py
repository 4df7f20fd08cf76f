"""The files of ember's append-only journals (answers, and writes held for a PostgreSQL
store): each made by one process, locked by it for its whole life, and read after its death.

The lock is what tells a live proxy's segment from a dead one's: a segment is created locked
(``create``), so no other process reads or deletes it while its owner runs; a start takes
only segments it can lock at once (``lock_if_dead``). Without ``fcntl`` (not POSIX) nothing
is locked and nothing is read as dead: a live proxy's segments are never taken.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]

#: Whether a dead process's segments can be told from a live one's here.
LOCKS = fcntl is not None


def create(path: Path) -> int:
    """A new segment (never an existing file: a name taken is ``FileExistsError``), owner
    only, locked for this process; its descriptor, opened for appending."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def remove(path: Path, fd: int) -> None:
    """Delete a segment and close its descriptor; either may already be gone."""
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        os.close(fd)


def lock_if_dead(path: Path) -> int | None:
    """A read descriptor of ``path`` locked by this process, or None when a live process
    holds it (or it was deleted meanwhile, or locks do not exist here)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
