"""What a PostgreSQL error means for serving (pure): about one statement, or about the store.

The same split as SQLite's (``store.health.classify``): an error about one statement (a
constraint, a missing table, a bug) fails that job alone; an error about the store itself —
the server unreachable or restarting, its disk full, the role not allowed to write — would
fail every later write the same way, so the database is switched off, its writes held and
retried (every state here is transient: a server comes back), and it is said once.

By SQLSTATE class (PostgreSQL's Appendix A), never by message text, which is localized:

- ``08`` connection exception, ``57P`` operator intervention (shutdown, crash, starting up),
  a pool that could not hand out a connection in time, and a connection error with no
  SQLSTATE at all (the socket closed): ``unreachable``;
- ``53100`` disk full: ``full``; ``53`` otherwise (out of memory, too many connections):
  ``busy``; ``58`` (I/O error): ``ioerr``;
- ``25006`` (a read-only server: a standby) and ``42501`` (the role may not write):
  ``unwritable``;
- ``40001``/``40P01`` (serialization failure, deadlock): ``busy``.
"""

from __future__ import annotations

from ember.store.health import State

_BY_CODE: tuple[tuple[str, State], ...] = (
    ("53100", "full"),
    ("08", "unreachable"),
    ("57P", "unreachable"),
    ("53", "busy"),
    ("58", "ioerr"),
    ("25006", "unwritable"),
    ("42501", "unwritable"),
    ("40001", "busy"),
    ("40P01", "busy"),
)


def classify(exc: BaseException) -> State | None:
    """The store-level state ``exc`` reveals, or None when it is about one statement."""
    import psycopg

    code = getattr(exc, "sqlstate", None)
    if isinstance(code, str) and code:
        for prefix, state in _BY_CODE:
            if code.startswith(prefix):
                return state
        return None
    if isinstance(exc, psycopg.OperationalError):
        return "unreachable"  # no SQLSTATE: the connection itself failed (pool timeouts too)
    if isinstance(exc, psycopg.InterfaceError) and "closed" in str(exc):
        return "unreachable"  # a connection the server dropped, used again
    return None
