"""The ``store_url`` setting: which values it takes, and how it is shown.

Invariants, and what each prevents:

- A password is taken as the user typed it: ``postgresql://me:p@ss:w/rd@db:5432/ember``
  means the password ``p@ss:w/rd`` on ``db`` (the user part ends at the *last* ``@`` before
  the host), and the setting keeps it percent-encoded (``normalized``). Read the usual way,
  that URL names a host ``ss@db`` and libpq's error quotes it ("failed to resolve host
  'ss@127.0.0.1'"): part of the password on the screen, and a store that never opens. A
  ``%`` followed by two hex digits is read as a percent-encoding already made.
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
import re
import urllib.parse

from ember.errors import ConfigError
from ember.store.health import ON_POSTGRES

#: The schemes libpq takes for a URL.
SCHEMES = ("postgresql", "postgres")
#: How an error names the setting (the file's key and the environment's variable).
KEY = "store_url (EMBER_STORE_URL)"
INSTALL = "pip install 'ember[postgres]'"
#: What a user or password may hold as it is in a URL: unreserved characters, sub-delims
#: and valid percent-encodings (RFC 3986); anything else is encoded by ``normalized``.
_ENCODED = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
#: A host part after the user's ``@``: hosts (a list, for libpq), ports, an IPv6 literal.
_HOSTS = re.compile(r"[A-Za-z0-9.\-_~%:,\[\]]*")


def check_store_url(value: str | None) -> str | None:
    """``value`` as the setting keeps it: None for the SQLite files (unset or empty), else a
    PostgreSQL URL. ``ValueError`` saying what is wrong and how to fix it, never echoing
    the value (it may hold a password)."""
    if value is None or not value.strip():
        return None
    url = normalized(value.strip())
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
            "write it as postgresql://user:password@host:5432/database"
        ) from None
    return url


def normalized(url: str) -> str:
    """``url`` with its user and password percent-encoded where they hold characters a URL
    cannot carry as they are (``@``, ``:`` and ``/`` in a password); the same string when
    there is none, or when it has no user part. The user part ends at the last ``@`` that
    is followed by a host (and port, and then ``/``, ``?`` or the end)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES or "@" not in rest or _well_formed(url):
        return url
    at = _user_end(rest)
    if at is None:
        return url
    userinfo, hosts = rest[:at], rest[at + 1 :]
    user, colon, password = userinfo.partition(":")
    if "/" in user and not colon:
        return url  # no user part: an '@' inside the database name or a parameter
    fixed = _encoded(user) + (colon and ":" + _encoded(password))
    return f"{scheme}{sep}{fixed}@{hosts}"


def _well_formed(url: str) -> bool:
    """Whether ``url`` reads the usual way with no doubt: one ``@``, ending a user part that
    needs no encoding, a port that is a number, no ``@`` in the database name (an ``@``
    after ``?`` is a parameter's)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    userinfo, at, _ = parts.netloc.rpartition("@")
    return (
        bool(at)
        and "@" not in userinfo
        and "@" not in parts.path
        and all(_ENCODED.fullmatch(p) for p in userinfo.split(":", 1))
    )


def _user_end(rest: str) -> int | None:
    at = rest.rfind("@")
    while at >= 0:
        tail = rest[at + 1 :]
        host = re.split(r"[/?#]", tail, maxsplit=1)[0]
        if _HOSTS.fullmatch(host):
            return at
        at = rest.rfind("@", 0, at)
    return None


def _encoded(part: str) -> str:
    """``part`` as a URL holds it: unchanged when it is already, else percent-encoded."""
    return part if _ENCODED.fullmatch(part) else urllib.parse.quote(part, safe="")


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
            "'?'); write it as postgresql://user:password@host:5432/database?sslmode=require, "
            "with only libpq's parameters after '?'",
        ) from None


def where(schema: str, url: str) -> str:
    """How a schema on the server of ``url`` is named in health, logs and errors (and how
    ``Health`` knows to give a server's advice, not a file's: ``health.ON_POSTGRES``)."""
    return f"{ON_POSTGRES}{schema} on {redacted(url)}"


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
