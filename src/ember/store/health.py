"""What a storage failure means for serving (pure).

A database error is either about one statement (a constraint, a bug: only that job fails) or
about the file (corrupt, read-only, disk full, I/O error: every later write would fail the
same way, or worse, make the damage bigger). File-level failures switch the database off for
this process: its features stop for that project, requests keep flowing, and the failure is
reported once with what to do (``ember doctor``), instead of a warning per request or, as
before, a raw traceback in ``ember stats``.

A switched-off database has a gap: the writes submitted while it is off. A *transient* failure
(full, unwritable, I/O, busy) is retried at a backoff (``retry_delay``) and the gap's writes
are held in memory until it is back; a write that cannot be held (past the hold limit, a
caller that waits for its answer, a corrupt file that never comes back in this process, a
shutdown before the file is back) is *dropped* and counted, by kind (``Health.dropped_by``).
Nothing accepted disappears without a number: ``/healthz``, ``storage-problems.json`` and
``ember stats`` show what was held, written late and dropped — also after the file is back.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field
from typing import Literal

State = Literal["ok", "corrupt", "unwritable", "full", "ioerr", "busy", "unreachable"]

#: States that can clear on their own (space freed, permissions fixed, a PostgreSQL server
#: back up): retried after a pause.
TRANSIENT: frozenset[State] = frozenset({"unwritable", "full", "ioerr", "busy", "unreachable"})
#: The first retry of a transient failure comes after this long; each failed retry doubles it.
RETRY_FIRST_SECONDS = 0.5
#: ... up to this long between retries: how late a held write can be once the disk is back.
RETRY_AFTER_SECONDS = 10.0

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
    "ember retries on its own (`ember doctor --db {target}` checks the file)",
    "full": "free disk space (or move EMBER_HOME to a larger disk); ember retries on its own "
    "(`ember doctor` checks the free space)",
    "ioerr": "check the disk (dmesg); ember retries on its own; `ember doctor --db {target}` "
    "checks the file",
    "busy": "another process holds the write lock for long; find it (`fuser`), ember retries "
    "(`ember doctor --db {target}` says whether an ember process has it open)",
    "unreachable": "check that the PostgreSQL server of store_url is running and reachable "
    "from here; ember retries on its own (`ember doctor` checks the server)",
}


#: How a database on a PostgreSQL store is named (``pg.url.where``): its failures are the
#: server's and the role's, and the advice for a file (make it writable, free the disk of
#: EMBER_HOME) would send the user to a file that does not exist.
ON_POSTGRES = "PostgreSQL schema "

_PG_FIX: dict[State, str] = {
    "unwritable": "the role of store_url may not write there (or the server is a read-only "
    "standby): `ember store init URL` prints the SQL a database administrator runs to grant "
    "it; ember retries on its own (`ember doctor` checks the server)",
    "full": "the server's disk is full: its administrator must free space; ember retries on "
    "its own (`ember doctor` checks the server)",
    "ioerr": "the server hit an I/O error: see its log; ember retries on its own (`ember "
    "doctor` checks the server)",
    "busy": "the server is busy (too many connections, or a lock held for long); ember "
    "retries on its own (`ember doctor` checks the server)",
    "unreachable": _FIX["unreachable"],
}

_WHAT: dict[State, str] = {
    "corrupt": "is damaged",
    "unwritable": "cannot be written",
    "full": "cannot grow: the disk is full",
    "ioerr": "hit a disk I/O error",
    "busy": "stayed locked by another process",
    "unreachable": "cannot be reached",
}


_PG_WHAT: dict[State, str] = {
    "unwritable": "cannot be written",
    "full": "cannot grow: the server's disk is full",
    "ioerr": "hit an I/O error on the server",
    "busy": "stayed busy",
    "unreachable": "cannot be reached",
}


def retry_delay(failed_retries: int, cap: float = RETRY_AFTER_SECONDS) -> float:
    """Seconds before the next retry of a transient failure, after ``failed_retries`` failed
    ones: short at first (a full disk is often freed within seconds, and held writes wait for
    the retry), never longer than ``cap`` (a retry costs a few page writes that fail)."""
    return float(min(cap, RETRY_FIRST_SECONDS * 2.0 ** min(failed_retries, 16)))


def kind_of(label: str) -> str:
    """What a write is, for counting what was dropped: its label up to the first ``:``
    (``accounting:library`` counts as ``accounting``); unlabelled writes are ``other``."""
    return label.split(":", 1)[0] or "other"


@dataclass(frozen=True)
class Health:
    """One database's standing, as reported by ``/healthz``, ``ember stats`` and the log.

    The counts cover the life of the database's owner (the process), across gaps: a file
    that came back keeps reporting what its gaps dropped (``reportable``), never silently."""

    path: str
    state: State = "ok"
    detail: str = ""
    since: float = field(default_factory=time.time)
    #: accepted writes never stored: refused while off, past the hold limit, on a corrupt
    #: file, or still held when the process stopped
    dropped: int = 0
    #: writes kept in memory now, to be written when the file is back
    held: int = 0
    #: writes that were held through a gap and then written
    caught_up: int = 0
    #: ``dropped`` by kind of write (``kind_of``), sorted by kind
    dropped_by: tuple[tuple[str, int], ...] = ()
    #: the state a database that is ``ok`` again came back from (None: never off)
    was: State | None = None
    #: answered requests of an earlier proxy, killed before it wrote their accounting rows,
    #: that have no row here (``store.journal``: found when this process started)
    lost_at_kill: int = 0

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def reportable(self) -> bool:
        """Switched off now, or writes were dropped earlier, or a killed proxy's rows are
        missing: listed by ``/healthz``."""
        return not self.ok or self.dropped > 0 or self.lost_at_kill > 0

    @property
    def on_postgres(self) -> bool:
        return self.path.startswith(ON_POSTGRES)

    def fix(self, target: str = "") -> str:
        fixes = _PG_FIX if self.on_postgres else _FIX
        return fixes.get(self.state, "").format(target=target or self.path)

    def describe(self) -> str:
        """One line: what is wrong with the file and what to do about it."""
        if self.ok:
            was = f" (was {self.was})" if self.was else ""
            killed = (
                f", and {self.lost_at_kill} answered requests of a killed proxy have no row"
                if self.lost_at_kill
                else ""
            )
            back = f" is writable again{was};" if self.was else ":"
            return f"{self.path}{back} {self.dropped} writes were lost{killed}"
        what = (_PG_WHAT if self.on_postgres else _WHAT).get(self.state, "has a problem")
        return f"{self.path} {what} ({self.detail}); {self.fix()}"

    def to_json(self) -> dict[str, object]:
        return {
            "db": self.path,
            "state": self.state,
            "detail": self.detail,
            "since": self.since,
            "was": self.was,
            "held_writes": self.held,
            "caught_up_writes": self.caught_up,
            "dropped_writes": self.dropped,
            "dropped_by": dict(self.dropped_by),
            "lost_at_kill": self.lost_at_kill,
            "fix": self.fix(),
        }
