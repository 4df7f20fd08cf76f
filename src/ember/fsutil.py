"""Small file helpers shared by every package that keeps a file of its own.

Files ember keeps for itself (under ``EMBER_HOME``: databases holding whole transcripts, logs,
run state) are private to the user: folders ``PRIVATE_DIR`` (0700), files ``PRIVATE_FILE``
(0600), whatever the umask — with the usual 022 they were readable by every local user.
``private_dirs`` and ``open_private`` create them so; ``write_bytes(private=True)`` writes one.
Files ember writes into the user's own project (``AGENTS.md``, ``MEMORY.md``) are the user's:
``write_bytes`` gives them the mode they had, or what the umask gives a new file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

#: The modes of what ember keeps for itself: only the user may read or enter them.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dirs(path: Path) -> None:
    """Create the folder ``path`` and the missing folders above it, each 0700 (folders that
    exist keep their mode). ``Path.mkdir(parents=True)`` gives the folders above the umask's
    mode, not the one asked for. Raises as ``mkdir`` does: ``FileExistsError`` when ``path``
    is a file, ``NotADirectoryError`` when a folder above it is one."""
    missing: list[Path] = []
    at = path
    while not os.path.lexists(at) and at.parent != at:
        missing.append(at)
        at = at.parent
    if not missing and not path.is_dir():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR)
        except FileExistsError:  # made meanwhile by another process
            if not folder.is_dir():
                raise
        else:
            os.chmod(folder, PRIVATE_DIR)  # exactly 0700, whatever the umask took


def open_private(path: Path, flags: int = os.O_RDWR) -> int:
    """``os.open`` of ``path``, created 0600 when it does not exist (an existing file keeps
    its mode)."""
    return os.open(path, flags | os.O_CREAT, PRIVATE_FILE)


def create_private(path: Path) -> None:
    """Create ``path`` empty and 0600 unless it exists (its folder must exist)."""
    os.close(open_private(path, os.O_WRONLY))


def write_bytes(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write atomically: readers see the old file or the new one, never half of one (a crash
    mid-write, or a full disk, leaves the previous file in place).

    The file keeps the mode it had; a new one gets what the user's umask gives any new file.
    A temporary file is created 0600, and replacing with it as is made the ``AGENTS.md`` and
    ``CLAUDE.local.md`` that ``ember learn --apply`` created unreadable to the user's group
    under umask 022 (and a ``settings.json`` rewritten by ``ember setup`` lost its mode).
    ``private``: a file ember keeps for itself, 0600 in 0700 folders."""
    if private:
        private_dirs(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, PRIVATE_FILE if private else _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: Any, *, private: bool = False) -> None:
    """``write_bytes`` of ``data`` as indented, key-sorted JSON."""
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_bytes(path, text.encode("utf-8"), private=private)


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask: from ``/proc/self/status`` where it is there (Linux), else by
    setting it and putting it back (there is no getter; another thread creating a file in
    that instant would get 022)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
