"""What a storage failure means for serving (pure).

A database error is either about one statement (a constraint, a bug: only that job fails) or
about the file (corrupt, read-only, disk full, I/O error: every later write would fail the
same way, or worse, make the damage bigger). File-level failures switch the database off for
this process: its features stop for that project, requests keep flowing, and the failure is
reported once with what to do (``ember doctor``), instead of a warning per request or, as
before, a raw traceback in ``ember stats``.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field
from typing import Literal

State = Literal["ok", "corrupt", "unwritable", "full", "ioerr", "busy"]

#: States that can clear on their own (space freed, permissions fixed): retried after a pause.
TRANSIENT: frozenset[State] = frozenset({"unwritable", "full", "ioerr", "busy"})
#: How long a transient failure keeps a database switched off before the next attempt.
RETRY_AFTER_SECONDS = 30.0

_BY_CODE: tuple[tuple[str, State], ...] = (
    ("SQLITE_CORRUPT", "corrupt"),
    ("SQLITE_NOTADB", "corrupt"),
    ("SQLITE_READONLY", "unwritable"),
    ("SQLITE_CANTOPEN", "unwritable"),
    ("SQLITE_PERM", "unwritable"),
    ("SQLITE_AUTH", "unwritable"),
    ("SQLITE_FULL", "full"),
    ("SQLITE_IOERR", "ioerr"),
    ("SQLITE_BUSY", "busy"),
    ("SQLITE_LOCKED", "busy"),
)
_BY_MESSAGE: tuple[tuple[str, State], ...] = (
    ("malformed", "corrupt"),
    ("not a database", "corrupt"),
    ("readonly database", "unwritable"),
    ("unable to open database", "unwritable"),
    ("disk is full", "full"),
    ("disk i/o error", "ioerr"),
    ("database is locked", "busy"),
)
_BY_ERRNO: dict[int, State] = {
    errno.EACCES: "unwritable",
    errno.EPERM: "unwritable",
    errno.EROFS: "unwritable",
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EIO: "ioerr",
    errno.ENOTDIR: "unwritable",
}


def classify(exc: BaseException) -> State | None:
    """The file-level state an exception reveals, or None when it is about one statement."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return _BY_ERRNO.get(exc.errno)
    name = getattr(exc, "sqlite_errorname", None)
    if isinstance(name, str):
        for prefix, state in _BY_CODE:
            if name.startswith(prefix):
                return state
    text = str(exc).lower()
    for needle, state in _BY_MESSAGE:
        if needle in text:
            return state
    return None


_FIX: dict[State, str] = {
    "corrupt": "stop the proxy and run `ember doctor --recover --db {target}` (the damaged "
    "file is kept beside the recovered one)",
    "unwritable": "make the file and its directory writable by this user, or move EMBER_HOME; "
    "ember retries on its own",
    "full": "free disk space (or move EMBER_HOME to a larger disk); ember retries on its own",
    "ioerr": "check the disk (dmesg); ember retries on its own; `ember doctor --db {target}` "
    "checks the file",
    "busy": "another process holds the write lock for long; find it (`fuser`), ember retries",
}


_WHAT: dict[State, str] = {
    "corrupt": "is damaged",
    "unwritable": "cannot be written",
    "full": "cannot grow: the disk is full",
    "ioerr": "hit a disk I/O error",
    "busy": "stayed locked by another process",
}


@dataclass(frozen=True)
class Health:
    """One database's standing, as reported by ``/healthz``, ``ember stats`` and the log."""

    path: str
    state: State = "ok"
    detail: str = ""
    since: float = field(default_factory=time.time)
    #: accepted writes that could not be stored because of this failure
    dropped: int = 0

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def fix(self, target: str = "") -> str:
        return _FIX.get(self.state, "").format(target=target or self.path)

    def describe(self) -> str:
        """One line: what is wrong with the file and what to do about it."""
        what = _WHAT.get(self.state, "has a problem")
        return f"{self.path} {what} ({self.detail}); {self.fix()}"

    def to_json(self) -> dict[str, object]:
        return {
            "db": self.path,
            "state": self.state,
            "detail": self.detail,
            "since": self.since,
            "dropped_writes": self.dropped,
            "fix": self.fix(),
        }
