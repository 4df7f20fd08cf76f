"""The connections of a process to one PostgreSQL: one bounded pool per URL (psycopg_pool).

Every ``PgDatabase`` of a process that uses the same URL borrows from the same pool, one
connection per read or write batch, given back at once: a hundred projects cost a handful of
server connections, not one each (a server allows ~100 in all).

Invariants, and what each prevents:

- Bounded everywhere: at most ``MAX_CONNECTIONS`` per URL per process; a borrower waits at
  most ``WAIT_SECONDS`` for one (a server that is down fails the borrower then, and the
  database says so once), each connection attempt at most ``CONNECT_SECONDS``, and the pool
  stops retrying a dead server after ``RECONNECT_SECONDS`` (the next borrower starts again):
  a server that comes back is used again within one retry of the owner's, never after a
  backoff grown for minutes.
- A statement runs at most ``STATEMENT_SECONDS`` (the server's ``statement_timeout``) and a
  TCP connection to a server that stopped answering is given up after ``TCP_SECONDS``
  (keepalives, ``tcp_user_timeout``): a writer thread never waits for ever on a network that
  dropped the server; the URL's own values for these win. A server that takes the
  connection and never answers (stopped, frozen) enforces none of these: each borrow is
  also bounded here (``ANSWER_SECONDS``, ``deadline.within``), and its connection cut past it.
- A connection that may have died is checked before it is lent (``check_connection``: an
  empty query): after a server restart the pool's connections are all dead, and the first
  write after the restart must not switch the database off for it. One given back less
  than ``FRESH_SECONDS`` ago is lent as it is (the check was a round trip of every read, a
  fifth of a memory search's), and ``borrowed`` runs the work once more on another
  connection when the one lent turns out dead: the restart case stays covered.
- No idle connection keeps its session state: connections are in autocommit and every
  transaction sets its ``search_path`` with ``SET LOCAL`` (``store.pg.migrate.enter``), so a
  connection lent for one project never carries it to the next borrower.
- The pool's own log lines (one per failed attempt while the server is down), and psycopg's
  warnings about connections that died, are kept out of the log: the outage is said once
  (``watch``); their warnings would repeat it every second.
- A pool is shared while anyone holds it (``acquire``/``release`` count), closed by the last
  release, and its threads end with it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ember.store.pg import deadline
from ember.store.pg.batch import CommitUnknown
from ember.store.pg.url import conninfo, redacted

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

T = TypeVar("T")

#: Connections to one server per process at most (the writers of busy projects, plus reads).
MAX_CONNECTIONS = 8
#: How long a borrower waits for a connection before the server counts as unreachable.
WAIT_SECONDS = 5.0
#: How long one connection attempt may take (libpq's connect_timeout, whole seconds).
CONNECT_SECONDS = 5
#: The longest a statement of ember's may run on the server.
STATEMENT_SECONDS = 60
#: How long a TCP connection may go unanswered before it counts as lost.
TCP_SECONDS = 30
#: How long the pool keeps retrying a server that refuses connections before it gives up
#: (until the next borrower asks).
RECONNECT_SECONDS = 5.0
#: A connection given back this recently is lent without a check (``borrowed`` retries).
FRESH_SECONDS = 1.0
#: How long the check of a connection before it is lent may wait for its answer.
CHECK_SECONDS = 5.0
#: The longest one borrow (a read, a batch) may wait for the server's answers, on this
#: side: past the server's own statement timeout, so it only ever cuts a silent server.
ANSWER_SECONDS = STATEMENT_SECONDS + 15.0

logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
# psycopg's own warnings while a connection dies ("error ignored terminating <Pipeline>"):
# the outage is said once, by ``watch``; one of these per cut connection buried it
logging.getLogger("psycopg").setLevel(logging.ERROR)

_lock = threading.Lock()
_pools: dict[str, tuple[ConnectionPool[Any], int]] = {}


def acquire(url: str) -> ConnectionPool[Any]:
    """The process's pool for ``url`` (opened on first use; no connection is made yet)."""
    with _lock:
        found = _pools.get(url)
        if found is not None:
            pool, holders = found
            _pools[url] = (pool, holders + 1)
            return pool
        pool = _open(url)
        _pools[url] = (pool, 1)
        return pool


def release(url: str) -> None:
    """One holder of ``url``'s pool is done; the last one closes it (bounded)."""
    with _lock:
        found = _pools.get(url)
        if found is None:
            return
        pool, holders = found
        if holders > 1:
            _pools[url] = (pool, holders - 1)
            return
        del _pools[url]
    pool.close(timeout=WAIT_SECONDS)


def bounded(url: str) -> str:
    """``url`` as a connection string whose every wait is bounded (the URL's values win)."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(conninfo(url))
    defaults: dict[str, str | int] = {
        "connect_timeout": CONNECT_SECONDS,
        "application_name": "ember",
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 4,
        "tcp_user_timeout": TCP_SECONDS * 1000,
    }
    extra = {k: v for k, v in defaults.items() if k not in given}
    options = str(given.get("options") or "")
    if "statement_timeout" not in options:
        extra["options"] = f"{options} -c statement_timeout={STATEMENT_SECONDS * 1000}".strip()
    return conninfo(url, **extra)


_given_back: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def _given(conn: psycopg.Connection[Any]) -> None:
    _given_back[conn] = time.monotonic()


def _check(conn: psycopg.Connection[Any]) -> None:
    """The pool's check before lending: none for a connection given back just now."""
    at = _given_back.get(conn)
    if at is not None and time.monotonic() - at < FRESH_SECONDS:
        return
    from psycopg_pool import ConnectionPool

    with deadline.within(conn, CHECK_SECONDS):  # a frozen server never answers it
        ConnectionPool.check_connection(conn)


def borrowed(
    pool: ConnectionPool[Any],
    run: Callable[[psycopg.Connection[Any]], T],
    seconds: float | None = None,
) -> T:
    """``run`` on a connection of ``pool``, and once more on another when the connection
    lent was dead (a server restart since it was last used): the pool's connections are
    all tested first (a restart killed every one), so the second try gets a live one.
    Never retried: what ``run`` raises otherwise, and a batch whose COMMIT may have taken
    (``batch.CommitUnknown``: the server decides, not a retry). ``seconds``: how long the
    server may take to answer ``run`` (``ANSWER_SECONDS`` unless said)."""
    bound = ANSWER_SECONDS if seconds is None else seconds
    dead = False
    try:
        with pool.connection() as conn:
            armed = None
            try:
                with deadline.within(conn, bound) as armed:
                    return run(conn)
            except BaseException:
                # read now (the pool closes it on the way out); a connection cut for its
                # silence is not a restart: another would wait as long
                dead = conn.broken and not (armed is not None and armed.fired)
                raise
    except CommitUnknown:
        raise
    except Exception:
        if not dead:
            raise
    pool.check()  # the others were lent by the same server: test them all once, drop the dead
    with pool.connection() as conn, deadline.within(conn, bound):
        return run(conn)


def _open(url: str) -> ConnectionPool[Any]:
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[Any] = ConnectionPool(
        bounded(url),
        min_size=0,
        max_size=MAX_CONNECTIONS,
        kwargs={"autocommit": True},
        check=_check,
        reset=_given,
        timeout=WAIT_SECONDS,
        reconnect_timeout=RECONNECT_SECONDS,
        name=f"ember {redacted(url)}",
        open=False,
    )
    pool.open(wait=False)
    return pool
