"""Why a test PostgreSQL cannot be had here: one exception class per cause.

Invariant: every way :mod:`ember.testing.postgres` can fail to give a server raises a
:class:`PostgresUnavailable` whose message says what is missing and how to get it, so a test
skips with that reason instead of failing on a connection error far from the cause.
"""

from __future__ import annotations


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL with pgvector can be started or reached; the message says why."""


class NoDriver(PostgresUnavailable):
    """psycopg (3) is not installed."""


class NoPostgresInstall(PostgresUnavailable):
    """No PostgreSQL binaries: pgserver is not installed, or its files are not all there."""


class NoUnprivilegedUser(PostgresUnavailable):
    """Running as root, and the OS user PostgreSQL must run as could not be found or created."""


class UnreachableDirectory(PostgresUnavailable):
    """The server's OS user cannot enter a directory it needs (a 0700 parent, typically)."""


class InitdbFailed(PostgresUnavailable):
    """initdb failed or timed out; the message ends with its output."""


class ServerStartFailed(PostgresUnavailable):
    """postgres exited or was not ready in time; the message ends with its log."""


class ServerUnreachable(PostgresUnavailable):
    """The server given by ``EMBER_TEST_PG_URL`` refused the connection or the setup."""


class ExtensionUnavailable(PostgresUnavailable):
    """The server has no pgvector (``CREATE EXTENSION vector`` failed)."""
