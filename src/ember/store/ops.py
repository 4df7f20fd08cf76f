"""Write jobs that can be written down: a named function and JSON arguments (``Op``).

A write job is normally a Python closure over a connection, and a closure cannot outlive its
process. The writes a PostgreSQL store holds through an outage (accounting rows, the memory
ledger, transcripts) must outlive it — a proxy stopped, or killed, while its server was down
delivers them at its next start (``store.pg.journal``) — so those writes are ``Op``\\ s: a
module-level function marked ``@replayable``, called with arguments orjson can write.

Invariants, and what each prevents:

- An op is named by its function's import path (``ember.store.accounting:insert_row``), and
  only a function under ``ember.`` marked ``@replayable`` is ever resolved from a name
  (``resolve``): a journal line can call nothing else, whatever it says.
- Arguments go through JSON: the function reads lists where it was given tuples, and must not
  depend on anything but its arguments and the connection (no clock read when replayed that
  the first run would have read differently: times are arguments).
- ``key`` identifies one write across processes: the store records it in the transaction
  that applies the write (``store.pg.batch``), so a write replayed after a COMMIT whose
  answer was lost, or after a kill between the COMMIT and its journal's note, is applied
  once.
- An op runs the same when called as a plain job (``op(conn)``): a SQLite file, a CLI
  command or a test runs it like any closure.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from ember.store.driver import Connection

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__ember_replayable__"


def replayable(fn: F) -> F:
    """Mark ``fn(conn, args)`` (a module-level function) as one a journal may name."""
    setattr(fn, _MARK, True)
    return fn


def name_of(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


class UnknownOp(LookupError):
    """A journal names a function this version does not have (or may not call)."""


def resolve(name: str) -> Callable[[Connection, Any], Any]:
    """The ``@replayable`` function ``name`` names; ``UnknownOp`` otherwise."""
    module, _, qualname = name.partition(":")
    if not module.startswith("ember.") or not qualname:
        raise UnknownOp(f"{name!r} is not a write of ember's")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise UnknownOp(f"{name!r} is not in this version of ember ({exc})") from None
    if not callable(found) or not getattr(found, _MARK, False):
        raise UnknownOp(f"{name!r} is not a replayable write")
    return found  # type: ignore[no-any-return]


class Op:
    """``fn(conn, args)`` as a write job. ``key`` is set when the op is journaled (or given,
    when it is replayed from a journal: ``replayed``)."""

    __slots__ = ("args", "fn", "key", "replayed", "ticket")

    def __init__(
        self,
        fn: Callable[[Connection, Any], Any],
        args: Any,
        *,
        key: int | None = None,
        replayed: bool = False,
    ) -> None:
        if not getattr(fn, _MARK, False):
            raise TypeError(f"{name_of(fn)} is not marked @replayable")
        self.fn = fn
        self.args = args
        self.key = key
        self.replayed = replayed
        #: the journal's record of this op while it is not delivered (``store.pg.journal``)
        self.ticket: Any = None

    @property
    def name(self) -> str:
        return name_of(self.fn)

    def keyed(self) -> int:
        """The op's key, made now if it has none: 63 random bits (a BIGINT in the store;
        the chance that two writes of a week meet is below one in ten billion)."""
        if self.key is None:
            self.key = secrets.randbits(63)
        return self.key

    def __call__(self, conn: Connection) -> Any:
        return self.fn(conn, self.args)

    def __repr__(self) -> str:
        return f"Op({self.name}, key={self.key})"


def key_of(fn: Any) -> int | None:
    """The key of a job's function when it is a journaled op."""
    return fn.key if isinstance(fn, Op) else None
