"""An existing ``EMBER_HOME`` made private to the user, once per process.

ember now creates its folders 0700 and its files 0600 (``ember.fsutil``); a home made before
that, or a file another tool dropped in, was left 0755/0644: every local user could read the
transcripts in its databases. ``keep_private`` takes the group's and others' bits off every
folder and file under the home (symbolic links are not followed), and says in ONE line how
many it changed. A file that belongs to another user is left as it is (said in the same
line); a home that is another user's is not looked at (a command run as another user, a
team's home read by a member). A file that cannot be changed is counted and the rest goes on:
a home that cannot be tightened is still used, as before; on a read-only file system nothing
can change, and nothing is said.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: The bits taken off: everything the group and others may do.
OPEN_BITS = 0o077

_done: set[Path] = set()


@dataclass(frozen=True)
class Tightened:
    """What ``tighten`` changed, and what it left."""

    folders: int = 0
    files: int = 0
    not_ours: int = 0
    failed: int = 0


def keep_private(home: Path) -> Tightened:
    """``tighten(home)`` the first time this process asks for ``home``; logs the one line
    (``said``) when anything was changed or left open. Never raises."""
    key = home.absolute()
    if key in _done:
        return Tightened()
    _done.add(key)
    try:
        found = tighten(home)
    except OSError as exc:  # the home's own checks say what is wrong with it
        log.debug("cannot make %s private: %s", home, exc)
        return Tightened()
    line = said(found, home)
    if line:
        log.warning("%s", line)
    return found


def tighten(home: Path) -> Tightened:
    """Take ``OPEN_BITS`` off ``home`` and every folder and file under it that is ours."""
    me = os.geteuid()
    counts = {"folders": 0, "files": 0, "not_ours": 0, "failed": 0}

    def visit(path: str, is_dir: bool) -> None:
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & OPEN_BITS:
                return
            if st.st_uid != me:
                counts["not_ours"] += 1
                return
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~OPEN_BITS)
        except FileNotFoundError:
            return  # removed meanwhile (a temporary file)
        except OSError as exc:
            if exc.errno == errno.EROFS:
                raise
            counts["failed"] += 1
            return
        counts["folders" if is_dir else "files"] += 1

    try:
        if not home.is_dir() or home.stat().st_uid != me:
            return Tightened()  # another user's home: not ours to change, nor to report on
        visit(str(home), True)
        for root, dirs, files in os.walk(home):  # a folder it cannot list is skipped
            for name in dirs:
                visit(os.path.join(root, name), True)
            for name in files:
                visit(os.path.join(root, name), False)
    except OSError as exc:  # read-only: nothing here can change
        if exc.errno != errno.EROFS:
            raise
        return Tightened()
    return Tightened(**counts)


def said(found: Tightened, home: Path) -> str | None:
    """The one line about it, None when there is nothing to say."""
    where = _shown(home)
    parts = []
    changed = _counted(found.folders, "folder") + _counted(found.files, "file")
    if changed:
        parts.append(
            f"made {' and '.join(changed)} under {where} private to you "
            "(they were readable by other users)"
        )
    if found.not_ours:
        parts.append(f"left {_counted(found.not_ours, 'file')[0]} of another user as they are")
    if found.failed:
        parts.append(f"could not change {_counted(found.failed, 'file')[0]} (check its mode)")
    return "ember: " + "; ".join(parts) if parts else None


def _counted(n: int, what: str) -> list[str]:
    return [f"{n} {what}{'s' if n != 1 else ''}"] if n else []


def _shown(home: Path) -> str:
    """``~/.ember`` rather than the full path, when the home is in the user's own."""
    try:
        return "~/" + str(home.absolute().relative_to(Path.home()))
    except (ValueError, RuntimeError):
        return str(home)
