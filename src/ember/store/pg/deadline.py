"""A bound, on this side, on how long the server may take to answer.

``statement_timeout`` is the server's own bound: a server that stopped answering (a host
frozen, a process stopped with SIGSTOP, a network that drops packets but keeps the TCP
connection up) never enforces it, and TCP keepalives are answered by the server's kernel
all the same. A writer thread waiting on such a server waited for ever: its held writes, and
every request reading that schema, with it.

``within(conn, seconds)`` arms a watchdog for the block: past ``seconds`` the connection's
socket is shut down from the watchdog's thread, the blocked call returns with a connection
error (``unreachable``: the writes are held, the database is switched off and watched), and
the pool drops the dead connection. A COMMIT cut this way is a lost COMMIT like any other
(``batch.CommitUnknown``): the server is asked what became of it.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Condition()
_heap: list[tuple[float, int, Armed]] = []
_armed: set[int] = set()
_ids = itertools.count()
_thread: threading.Thread | None = None
#: connections cut by the watchdog (tests, and the log's detail)
cut = 0


class Armed:
    """One bounded block: ``fired`` once the watchdog cut its connection."""

    __slots__ = ("conn", "fired", "token")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.fired = False
        self.token = next(_ids)


@contextlib.contextmanager
def within(conn: Any, seconds: float | None) -> Iterator[Armed]:
    """Run the block with ``conn`` cut off if it takes longer than ``seconds`` (None: no
    bound)."""
    armed = Armed(conn)
    if seconds is None:
        yield armed
        return
    _arm(armed, time.monotonic() + seconds)
    try:
        yield armed
    finally:
        with _lock:
            _armed.discard(armed.token)


def _arm(armed: Armed, at: float) -> None:
    global _thread
    with _lock:
        _armed.add(armed.token)
        if len(_heap) > 1024 + 2 * len(_armed):  # blocks that ended in time: let them go
            _heap[:] = [e for e in _heap if e[1] in _armed]
            heapq.heapify(_heap)
        heapq.heappush(_heap, (at, armed.token, armed))
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_watch, name="ember-pg-deadline", daemon=True)
            _thread.start()
        if _heap[0][1] == armed.token:  # the soonest now: the watchdog sleeps until a later one
            _lock.notify()


def _watch() -> None:
    while True:
        with _lock:
            while True:
                while _heap and _heap[0][1] not in _armed:
                    heapq.heappop(_heap)  # finished in time
                if not _heap:
                    _lock.wait(30.0)
                    continue
                wait = _heap[0][0] - time.monotonic()
                if wait <= 0:
                    _, token, armed = heapq.heappop(_heap)
                    _armed.discard(token)
                    armed.fired = True
                    break
                _lock.wait(wait)
        _cut(armed.conn)


def _cut(conn: Any) -> None:
    """Shut the connection's socket down: the thread blocked on it gets an error now."""
    global cut
    try:
        fd = conn.pgconn.socket
    except Exception:
        return  # closed meanwhile
    try:
        sock = socket.socket(fileno=_dup(fd))
    except OSError:
        return
    with sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    cut += 1
    log.debug("a PostgreSQL connection that did not answer in time was cut")


def _dup(fd: int) -> int:
    import os

    return os.dup(fd)
