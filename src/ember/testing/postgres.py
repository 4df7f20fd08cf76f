"""A real PostgreSQL 16 with pgvector for tests and benchmarks.

::

    with postgres_server() as server:          # a throwaway server, or $EMBER_TEST_PG_URL's
        with server.fresh_database() as url:   # a new database with pgvector, dropped after
            with psycopg.connect(url) as conn:
                ...

Invariants:

- A test gets a database of its own: :meth:`PgServer.fresh_database` copies a template that
  already holds the ``vector`` extension (a copy costs a few milliseconds, a
  ``CREATE EXTENSION`` per test more) and drops it with ``FORCE`` afterwards, so one test's
  tables or lingering connections never reach the next.
- Without ``EMBER_TEST_PG_URL`` the server is local and throwaway (:mod:`.pg_local`): its
  process is stopped and its files removed when the block ends, however it ends.
- With ``EMBER_TEST_PG_URL`` (a ``postgresql://`` URL of a role that may create databases, on
  a PostgreSQL 13 or later with pgvector) that server is used instead and left as it was: every
  database this made is dropped.
- A local server gets SIGINT when the thread that started it exits (see :mod:`.pg_local`):
  enter :func:`postgres_server` from a thread that outlives its use.
- Whatever keeps a server from being had raises a :class:`PostgresUnavailable` subclass that
  says why, never a bare connection error.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.testing.pg_errors import (
    ExtensionUnavailable,
    InitdbFailed,
    NoDriver,
    NoPostgresInstall,
    NoUnprivilegedUser,
    PostgresUnavailable,
    ServerStartFailed,
    ServerUnreachable,
    UnreachableDirectory,
)
from ember.testing.pg_host import OS_USER
from ember.testing.pg_local import SUPERUSER, local_server

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "ENV_REQUIRED",
    "ENV_URL",
    "ExtensionUnavailable",
    "InitdbFailed",
    "NoDriver",
    "NoPostgresInstall",
    "NoUnprivilegedUser",
    "PgServer",
    "PostgresUnavailable",
    "ServerStartFailed",
    "ServerUnreachable",
    "UnreachableDirectory",
    "default_workdir",
    "postgres_server",
]

ENV_URL = "EMBER_TEST_PG_URL"
#: Set (CI does) to make the test fixtures fail, not skip, when no server can be had.
ENV_REQUIRED = "EMBER_TEST_PG_REQUIRED"


@dataclass
class PgServer:
    """A running server: ``url`` reaches its maintenance database (no pgvector there: tests
    use :meth:`fresh_database`) as a superuser (local) or as the role ``EMBER_TEST_PG_URL``
    names; ``pid`` and ``data_dir`` are None for the latter."""

    url: str
    template: str
    pid: int | None
    data_dir: Path | None
    os_user: str | None
    _admin: psycopg.Connection[Any] = field(repr=False)

    def database_url(self, name: str) -> str:
        """``url`` with its database replaced by ``name``."""
        parts = urllib.parse.urlsplit(self.url)
        return urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(name)))

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new database copied from the template (pgvector installed), dropped on exit
        with any connection still open to it."""
        from psycopg import sql

        name = f"ember_t_{secrets.token_hex(6)}"
        self._admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}{}").format(
                sql.Identifier(name), sql.Identifier(self.template), sql.SQL(self._strategy())
            )
        )
        try:
            yield self.database_url(name)
        finally:
            self._drop(name)

    def _strategy(self) -> str:
        # FILE_COPY (PG 15+): a template this small copies a little faster as files than
        # WAL_LOG's block by block (19 vs 22 ms, interleaved, on disk); its two checkpoints
        # are cheap with fsync off.
        return " STRATEGY FILE_COPY" if self._admin.info.server_version >= 150000 else ""

    def _drop(self, name: str) -> None:
        """Drop ``name`` with whatever is still connected to it. DROP DATABASE waits for a
        backend that is still exiting in 100 ms steps, and a test's last connection is
        usually one (a backend that wrote takes a moment to go): ending them and polling
        until they are gone makes a drop ~8 ms instead of ~110."""
        from psycopg import sql

        others = "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
        self._admin.execute(f"SELECT pg_terminate_backend(pid) {others}", (name,))
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            row = self._admin.execute(f"SELECT count(*) {others}", (name,)).fetchone()
            if row is None or row[0] == 0:
                break
            time.sleep(0.001)
        self._admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextlib.contextmanager
def postgres_server(
    workdir: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    install: Path | None = None,
    os_user: str = OS_USER,
    start_timeout: float = 30.0,
    stop_timeout: float = 15.0,
) -> Iterator[PgServer]:
    """A PostgreSQL with pgvector for the block: ``env[EMBER_TEST_PG_URL]``'s (``env``
    defaults to ``os.environ``) or a local one whose files live in a new directory under
    ``workdir`` (:func:`default_workdir` by default), removed on exit.

    ``install`` is a PostgreSQL tree laid out like the pgserver wheel's ``pginstall`` (the
    installed wheel's by default); ``os_user`` the OS user the server runs as when we are root.
    """
    _require_driver()
    url = (os.environ if env is None else env).get(ENV_URL, "")
    if url:
        with _serving(_checked_url(url), local=None) as server:
            yield server
        return
    base = default_workdir() if workdir is None else workdir
    run_dir = Path(tempfile.mkdtemp(prefix="ember-pg-", dir=base))
    try:
        with local_server(
            run_dir,
            install=install,
            os_user=os_user,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
        ) as local:
            host = urllib.parse.quote(str(local.socket_dir))
            admin = f"postgresql://{SUPERUSER}@/postgres?host={host}"
            with _serving(admin, local=(local.pid, local.data_dir, local.account.name)) as server:
                yield server
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def default_workdir() -> Path:
    """``/dev/shm`` when it is there with 1 GiB free, else the system's temp dir. The data is
    thrown away, and in memory a test's database copy costs ~8 ms where on a disk shared with
    other work it took 35-75 ms (a server starts in ~0.4 s instead of ~0.65 s)."""
    shm = Path("/dev/shm")
    try:
        room = os.statvfs(shm)
    except OSError:
        return Path(tempfile.gettempdir())
    if room.f_bavail * room.f_frsize >= 1 << 30 and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


@contextlib.contextmanager
def _serving(url: str, local: tuple[int, Path, str] | None) -> Iterator[PgServer]:
    """Connect as admin, make the pgvector template, yield; drop it (external) and close."""
    import psycopg

    try:
        admin = _connect(url)
    except psycopg.Error as err:
        raise ServerUnreachable(f"cannot connect to {_redacted(url)}: {err}") from err
    template = f"ember_tpl_{secrets.token_hex(6)}"
    pid, data_dir, os_user = local if local is not None else (None, None, None)
    server = PgServer(url, template, pid, data_dir, os_user, admin)
    try:
        _make_template(server)
        try:
            yield server
        finally:
            if local is None:
                server._drop(template)
    finally:
        admin.close()


def _make_template(server: PgServer) -> None:
    import psycopg
    from psycopg import sql

    try:
        server._admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(server.template)))
    except psycopg.Error as err:
        raise ServerUnreachable(
            f"cannot create a database on {_redacted(server.url)} (the role needs CREATEDB): {err}"
        ) from err
    try:
        with _connect(server.database_url(server.template)) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as err:
        server._drop(server.template)
        raise ExtensionUnavailable(
            f"CREATE EXTENSION vector failed on {_redacted(server.url)}: {err}"
        ) from err


def _connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection whose connecting and every statement are bounded: a stuck
    server fails the setup instead of hanging the test run."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    bounded = make_conninfo(url, connect_timeout=10, options="-c statement_timeout=60000")
    return psycopg.connect(bounded, autocommit=True)


def _require_driver() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError as err:
        raise NoDriver(
            "psycopg 3 is not installed (pip install 'psycopg[binary]', or the postgres extra)"
        ) from err


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ServerUnreachable(f"{ENV_URL} must be a postgresql:// URL, not {_redacted(url)!r}")
    return url


def _redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
