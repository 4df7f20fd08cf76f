"""The ``store_url`` setting: which values it takes, and how it is shown (issue #24).

Invariants, and what each prevents:

- Only ``postgresql://`` and ``postgres://`` URLs are taken (empty means the SQLite files of
  today): a ``sqlite:///...`` or a bare host name fails at start-up with what to write
  instead, never later as a driver's error about a connection string.
- The URL may hold a password. Nothing ember says — an error, a log line, a banner, the
  health of a database — shows the URL itself, only ``redacted(url)``: the user, host, port
  and database (``ember@db.internal:5432/ember``). A message is built from the parts it
  names, never by removing the password from the text, so a password that also appears
  elsewhere in the URL (or one percent-encoded) cannot slip through.
- psycopg (the ``postgres`` extra) is imported only when a store URL is used: a user of the
  SQLite store never needs it, and one who set a URL without it is told which package to
  install (``require_driver``).
"""

from __future__ import annotations

import importlib.util
import urllib.parse

from ember.errors import ConfigError

#: The schemes libpq takes for a URL.
SCHEMES = ("postgresql", "postgres")
#: How an error names the setting (the file's key and the environment's variable).
KEY = "store_url (EMBER_STORE_URL)"
INSTALL = "pip install 'ember[postgres]'"


def check_store_url(value: str | None) -> str | None:
    """``value`` as the setting keeps it: None for the SQLite files (unset or empty), else a
    PostgreSQL URL. ``ValueError`` saying what is wrong and how to fix it, never echoing
    the value (it may hold a password)."""
    if value is None or not value.strip():
        return None
    url = value.strip()
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        shown = f"a {scheme}:// URL" if sep else "not a URL"
        raise ValueError(
            f"must be a postgresql:// (or postgres://) URL such as "
            f"postgresql://user:password@host:5432/ember, and this is {shown}; "
            "unset it to keep the SQLite files in EMBER_HOME"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(
            "is not a valid URL (a port that is not a number, or a bracket left open); "
            "write it as postgresql://user:password@host:5432/database, percent-encoding "
            "any '@', ':' or '/' inside the password"
        ) from None
    return url


def redacted(url: str) -> str:
    """``user@host:port/database`` of ``url``: what ember shows of it, never its password.
    A server reached over a unix socket shows the socket's directory as its host."""
    parts = urllib.parse.urlsplit(url)
    user = urllib.parse.unquote(parts.username) if parts.username else ""
    host = parts.hostname or ""
    if not host:
        query = urllib.parse.parse_qs(parts.query)
        host = (query.get("host") or [""])[0] or "localhost"
    try:
        port = parts.port or 5432
    except ValueError:
        port = 5432
    database = urllib.parse.unquote(parts.path.lstrip("/")) or user or "postgres"
    return f"{user + '@' if user else ''}{host}:{port}/{database}"


def scrubbed(text: str, url: str) -> str:
    """``text`` with the password of ``url`` (as written and URL-decoded) replaced: a libpq
    message can quote the connection string it was given."""
    raw = urllib.parse.urlsplit(url).password
    for secret in {raw, urllib.parse.unquote(raw) if raw else None}:
        if secret:
            text = text.replace(secret, "***")
    return text


def conninfo(url: str, **extra: str | int) -> str:
    """``url`` as libpq's connection string, with ``extra`` parameters; ``ConfigError`` when
    libpq cannot read it, without its words (they quote the part they could not read, which
    may be the password)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import make_conninfo

    try:
        return make_conninfo(url, **extra)
    except ProgrammingError:
        raise ConfigError(
            KEY,
            f"the URL of {redacted(url)} cannot be read by libpq (an unknown parameter after "
            "'?', or a '%' that is not a percent-encoding); write it as "
            "postgresql://user:password@host:5432/database, percent-encoding any '%', '@', "
            "':' or '/' inside the password",
        ) from None


def where(schema: str, url: str) -> str:
    """How a schema on the server of ``url`` is named in health, logs and errors."""
    return f"PostgreSQL schema {schema} on {redacted(url)}"


def require_driver() -> None:
    """Raise ``ConfigError`` naming the package to install when psycopg or its pool is
    missing (a store URL is set and nothing can reach it)."""
    for module in ("psycopg", "psycopg_pool"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ConfigError(
                KEY,
                f"a PostgreSQL store needs the {module} package, which is not installed: "
                f"{INSTALL} (or unset it to keep the SQLite files)",
            )
