"""Small file helpers shared by every package that keeps a file of its own."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes(path: Path, data: bytes) -> None:
    """Write atomically: readers see the old file or the new one, never half of one (a crash
    mid-write, or a full disk, leaves the previous file in place).

    The file keeps the mode it had; a new one gets what the user's umask gives any new file.
    A temporary file is created 0600, and replacing with it as is made the ``AGENTS.md`` and
    ``CLAUDE.local.md`` that ``ember learn --apply`` created unreadable to the user's group
    under umask 022 (and a ``settings.json`` rewritten by ``ember setup`` lost its mode)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: Any) -> None:
    """``write_bytes`` of ``data`` as indented, key-sorted JSON."""
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_bytes(path, text.encode("utf-8"))


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
