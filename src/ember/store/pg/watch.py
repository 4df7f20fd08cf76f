"""One PostgreSQL server as this process sees it: down or up, said once, and watched while down.

Every schema of a store is a database of its own (``PgDatabase``) with a health of its own,
but a server that goes away takes every schema with it: said per schema, and by each feature
that met it, one outage was 18 to 29 lines. And a schema came back only when a write or a
read of its own reached the server: ``/healthz`` said "unreachable" minutes after the server
was back, until a request of that project came.

Invariants, and what each prevents:

- One line when the server goes (the first schema of this process to lose it, whatever the
  number of schemas and features), and one when it is back, with what the outage held and
  delivered — once every schema's held writes are written (or after ``REPORT_SECONDS``). A
  server that goes again within ``QUIET_SECONDS`` of coming back (a flapping network, a
  pool that timed out under load) is said when it stays down that long, not at every flap.
- While the server is down a thread of its own tries it every ``PROBE_SECONDS`` (a
  connection and ``SELECT 1``, bounded): the schemas are told as soon as it answers
  (``server_back``) and come back without traffic; writers wait for it instead of each
  trying the server on its own backoff.
- While it is down, every schema of this process fails at once (``down``): only the first
  operation to meet the outage waits for the pool's timeout, never each schema or request.
- Nothing here holds a lock while it talks to the server.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any, Protocol

from ember.store.health import Health
from ember.store.pg.url import redacted, scrubbed

log = logging.getLogger("ember.store.database")

#: How often a server that is down is tried again.
PROBE_SECONDS = 2.0
#: How long the "back" line waits for the held writes to be delivered before it is said.
REPORT_SECONDS = 60.0
#: An outage that starts this soon after the last one ended is said only once it lasts this
#: long.
QUIET_SECONDS = 60.0


class Member(Protocol):
    """A schema of the server (``PgDatabase``)."""

    @property
    def health(self) -> Health: ...

    def server_back(self) -> None: ...


class Watch:
    def __init__(self, url: str) -> None:
        self.url = url
        self.name = redacted(url)
        self._lock = threading.Lock()
        self._members: weakref.WeakSet[Any] = weakref.WeakSet()
        self._down_since: float | None = None  # wall clock
        self._said_down = False
        self._want_say = False  # a member that logs met the outage
        self._back_at: float | None = None  # monotonic: when the last outage ended
        self._holding = ""
        self.cause = ""
        self._baseline: dict[int, tuple[int, int]] = {}
        self._prober: threading.Thread | None = None
        self.probes = 0  # tries of the server while down (tests)

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def join(self, member: Member) -> None:
        with self._lock:
            self._members.add(member)

    def leave(self, member: Member) -> None:
        """``member`` closed. The last one out ends the watch's outage, said or not: nobody
        of this process waits for the server any more (its probe stops)."""
        with self._lock:
            self._members.discard(member)
            if not self._members:
                self._down_since = None
                self._said_down = self._want_say = False
                self._holding = ""

    def went_down(self, cause: BaseException | str, holding: str, *, say: bool = True) -> None:
        """A schema could not reach the server. The first time in an outage (and the first
        time a member that logs meets it): one line; the probe starts."""
        detail = scrubbed(str(cause), self.url)
        with self._lock:
            if self._down_since is None:
                # a borrower that gave up waiting for a connection met the outage that long ago
                self._down_since = time.time() - _waited(cause)
                self._said_down = self._want_say = False
                self.cause = detail
                self._baseline = {id(m): _counts(m.health) for m in self._members}
            if say:
                self._want_say = True
                self._holding = self._holding or holding
            if self._prober is None or not self._prober.is_alive():
                self._prober = threading.Thread(
                    target=self._probe_until_back, name=f"ember-pg-watch:{self.name}", daemon=True
                )
                self._prober.start()

    def _maybe_say(self) -> None:
        """The outage's line, once, by a member that logs, unless it began just after the
        last one ended and has not lasted ``QUIET_SECONDS`` yet."""
        with self._lock:
            since = self._down_since
            back = self._back_at
            quiet = back is None or (since is not None and time.time() - since >= QUIET_SECONDS)
            quiet = quiet or (back is not None and time.monotonic() - back >= QUIET_SECONDS)
            speak = since is not None and self._want_say and not self._said_down and quiet
            if speak:
                self._said_down = True
            holding, detail = self._holding, self.cause
        if speak:
            log.warning(
                "PostgreSQL at %s unreachable (%s): %s; requests go on. Fix: check that the "
                "server of store_url is running and reachable from here (`ember doctor` "
                "checks it); ember tries it every %g s and delivers what it holds when it "
                "answers",
                self.name,
                detail,
                holding,
                PROBE_SECONDS,
            )

    def came_back(self) -> None:
        """A schema reached the server while it was down (its own write or read)."""
        self._back()

    def _back(self) -> None:
        with self._lock:
            since = self._down_since
            if since is None:
                return
            self._down_since = None
            self._back_at = time.monotonic()
            self._holding = ""
            said = self._said_down
            members = list(self._members)
            baseline = dict(self._baseline)
        for m in members:
            m.server_back()
        if said:
            threading.Thread(
                target=self._report,
                args=(since, members, baseline),
                name=f"ember-pg-back:{self.name}",
                daemon=True,
            ).start()

    def _probe_until_back(self) -> None:
        """Try the server now (the line names why it failed: a pool's timeout hides it, and
        a server that answers at once was a blip, never said), then every
        ``PROBE_SECONDS``."""
        while self.down:
            self.probes += 1
            failure = answers(self.url)
            if failure is None:
                self._back()
                return
            with self._lock:
                self.cause = scrubbed(failure, self.url)
            self._maybe_say()
            time.sleep(PROBE_SECONDS)

    def _report(
        self, since: float, members: list[Any], baseline: dict[int, tuple[int, int]]
    ) -> None:
        """The "back" line, once the held writes are written (or ``REPORT_SECONDS`` passed)."""
        deadline = time.monotonic() + REPORT_SECONDS
        while time.monotonic() < deadline and not self.down:
            if all(m.health.ok and m.health.held == 0 for m in members):
                break
            time.sleep(0.2)
        delivered = lost = held = 0
        for m in members:
            health = m.health
            caught_up, dropped = _counts(health)
            was = baseline.get(id(m), (0, 0))
            delivered += caught_up - was[0]
            lost += dropped - was[1]
            held += health.held
        still = f", {held} still held" if held else ""
        log.warning(
            "PostgreSQL at %s back after %.0f s: delivered %d held writes, %d lost%s",
            self.name,
            time.time() - since,
            delivered,
            lost,
            still,
        )


def _waited(cause: BaseException | str) -> float:
    """How long the operation that met the outage waited for a connection first (the pool's
    timeout: the server was gone before it gave up)."""
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover - the postgres extra is there when this runs
        return 0.0
    if isinstance(cause, PoolTimeout):
        from ember.store.pg.pool import WAIT_SECONDS

        return WAIT_SECONDS
    return 0.0


def _counts(health: Health) -> tuple[int, int]:
    return health.caught_up, health.dropped


def answers(url: str) -> str | None:
    """None when the server of ``url`` takes a connection and answers ``SELECT 1``; else
    why not, in one line (every wait bounded: ``pool.bounded``'s connect timeout, and
    ``deadline``)."""
    import psycopg

    from ember.store.pg import deadline
    from ember.store.pg.pool import CONNECT_SECONDS, bounded

    try:
        with (
            psycopg.connect(bounded(url), autocommit=True) as conn,
            deadline.within(conn, CONNECT_SECONDS * 2),
        ):
            conn.execute("SELECT 1").fetchone()
    except Exception as exc:
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


_lock = threading.Lock()
_watches: dict[str, Watch] = {}


def watch_for(url: str) -> Watch:
    """The process's watch of the server of ``url``."""
    with _lock:
        found = _watches.get(url)
        if found is None:
            found = _watches[url] = Watch(url)
        return found
