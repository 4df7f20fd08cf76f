"""``ember store init URL``: a PostgreSQL database made ready for ember, or the SQL that does it.

A team's store is two steps: a database with a role that may use it (a database
administrator's, or the user's own as a superuser), then ``ember store init URL``. This checks
and makes, in order, what ember needs there — a server it can reach, pgvector in the
database, the right to create ember's schemas, ember's home schema — and for each thing the
role may not do itself, gives the exact SQL a database administrator runs (``Setup.sql``),
printed as a psql script (``lines``) that can be piped to ``psql``.

Invariants, and what each prevents:

- The password is never printed: the URL is shown as ``redacted``, a server's words pass
  through ``scrubbed``, and the SQL that creates a role says ``'<password of store_url>'``.
- Every message names PostgreSQL and the server (``user@host:port/db``), never a file: a
  role without rights is told which right and how to grant it, not to make a file
  writable.
- Nothing is created that the role could not use: the home schema is made only once every
  check passed, so a failed init leaves the database as it was.
- A database where another role made ember's schemas is said so, with the grant and the URL
  option (``options=-c role=...``) that let a second role work in them as the first: without
  it, the second role's proxy fails on every write ("permission denied for schema").
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ember.store.pg.url import redacted, scrubbed

#: The oldest server ember's PostgreSQL schemas run on.
MIN_VERSION = 130000
PASSWORD_PLACEHOLDER = "'<password of store_url>'"
#: ember's schemas in a database (``pg.names``)
_OURS = r"^ember_(home|global|p_|f_)"


@dataclass
class Step:
    what: str
    ok: bool
    detail: str


@dataclass
class Setup:
    """What ``init_store`` found and did; ``sql``: what a database administrator must run
    (empty when the store is ready), ``why``: for what."""

    store: str
    steps: list[Step] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.sql and all(s.ok for s in self.steps)

    def lines(self) -> list[str]:
        """The report as a psql script: every line but the SQL is a comment."""
        out = [f"-- ember store init: PostgreSQL {self.store}"]
        out += [f"-- {'ok  ' if s.ok else 'NO  '} {s.what}: {s.detail}" for s in self.steps]
        if self.sql:
            out.append("--")
            out += [f"-- {w}" for w in self.why]
            out.append(
                "-- Run this as a database administrator (for example `sudo -u postgres psql`, "
                "or pipe this output to psql), then `ember store init` again:"
            )
            out += self.sql
        elif self.ok:
            out.append(
                "-- ready: set store_url (EMBER_STORE_URL) to this URL and start `ember proxy`; "
                "each project gets its schema on first use"
            )
        return out


def quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _named(url: str) -> tuple[str, str]:
    """(role, database) the URL names (libpq's defaults: the OS user, the role's name)."""
    import getpass

    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    role = urllib.parse.unquote(parts.username or "") or (query.get("user") or [""])[0]
    role = role or getpass.getuser()
    database = urllib.parse.unquote(parts.path.lstrip("/")) or (query.get("dbname") or [""])[0]
    return role, database or role


def init_store(url: str) -> Setup:
    """Check the store of ``url`` and make what ember needs there (module docstring)."""
    import psycopg

    from ember.store.pg.pool import bounded

    setup = Setup(redacted(url))
    try:
        conn = psycopg.connect(bounded(url), autocommit=True)
    except psycopg.OperationalError as exc:
        _not_connected(setup, url, exc)
        return setup
    with conn:
        setup.steps.append(Step("server", True, f"reached {setup.store}"))
        ready = _version(conn, setup) and _vector(conn, setup) and _rights(conn, setup)
        if ready and not setup.sql:
            _home(conn, setup)
    return setup


def _not_connected(setup: Setup, url: str, exc: BaseException) -> None:
    """A connection refused: a missing database or role gets the SQL that creates it;
    anything else is the server's words (scrubbed) and what to check."""
    words = scrubbed(str(exc).strip(), url)
    said = words.rsplit("FATAL:", 1)[-1].strip().splitlines()[0] if words else ""
    role, database = _named(url)
    lower = said.lower()
    if "database" in lower and "does not exist" in lower:
        setup.steps.append(Step("database", False, said))
        setup.why.append(f"The database {database} does not exist on {setup.store}.")
        setup.sql += _create_database(role, database)
    elif ("role" in lower and "does not exist" in lower) or "authentication failed" in lower:
        setup.steps.append(Step("role", False, said))
        setup.why.append(
            f"The role {role} cannot log in (it does not exist, or the password of the URL "
            "is not its password): create it, or fix the password in store_url."
        )
        setup.sql.append(f"CREATE ROLE {quoted(role)} LOGIN PASSWORD {PASSWORD_PLACEHOLDER};")
        setup.sql += _create_database(role, database, if_missing=True)
    else:
        setup.steps.append(
            Step(
                "server",
                False,
                f"cannot reach PostgreSQL at {setup.store} ({said or type(exc).__name__}); "
                "check that the server is running and reachable from here, and the host and "
                "port of the URL",
            )
        )


def _create_database(role: str, database: str, *, if_missing: bool = False) -> list[str]:
    note = "  -- unless it exists already" if if_missing else ""
    return [
        f"CREATE DATABASE {quoted(database)} OWNER {quoted(role)};{note}",
        f"\\connect {quoted(database)}",
        "CREATE EXTENSION IF NOT EXISTS vector;",
    ]


def _version(conn: Any, setup: Setup) -> bool:
    number = int(conn.execute("SHOW server_version_num").fetchone()[0])
    shown = str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]
    ok = number >= MIN_VERSION
    detail = f"PostgreSQL {shown}" + ("" if ok else ": ember needs PostgreSQL 13 or later")
    setup.steps.append(Step("version", ok, detail))
    return ok


def _vector(conn: Any, setup: Setup) -> bool:
    """pgvector in the database: there, created now, or the SQL for an administrator."""
    import psycopg

    row = conn.execute(
        "SELECT default_version, installed_version FROM pg_available_extensions "
        "WHERE name = 'vector'"
    ).fetchone()
    if row is None:
        setup.steps.append(
            Step(
                "pgvector",
                False,
                "not installed on the server: install its package (postgresql-16-pgvector on "
                "Debian and Ubuntu, pgvector on Homebrew; github.com/pgvector/pgvector), then "
                "run this again",
            )
        )
        return False
    if row[1] is not None:
        setup.steps.append(Step("pgvector", True, f"version {row[1]} in this database"))
        return True
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        setup.steps.append(Step("pgvector", False, "only a superuser may create the extension"))
        setup.why.append("pgvector (memory's vectors) must be created in this database.")
        setup.sql.append("CREATE EXTENSION IF NOT EXISTS vector;")
        return True
    setup.steps.append(Step("pgvector", True, f"version {row[0]} created in this database"))
    return True


def _rights(conn: Any, setup: Setup) -> bool:
    """The role may create ember's schemas, and use those already there."""
    role, database, may = conn.execute(
        "SELECT current_user, current_database(), "
        "has_database_privilege(current_user, current_database(), 'CREATE')"
    ).fetchone()
    if may:
        setup.steps.append(Step("rights", True, f"role {role} may create ember's schemas"))
    else:
        setup.steps.append(Step("rights", False, f"role {role} may not create schemas here"))
        setup.why.append(f"The role {role} must be allowed to create a schema per project.")
        setup.sql.append(f"GRANT CREATE ON DATABASE {quoted(database)} TO {quoted(role)};")
    owners = [
        str(r[0])
        for r in conn.execute(
            "SELECT DISTINCT pg_get_userbyid(n.nspowner) FROM pg_namespace n "
            "WHERE n.nspname ~ %s AND NOT pg_has_role(current_user, n.nspowner, 'MEMBER') "
            "ORDER BY 1",
            (_OURS,),
        ).fetchall()
    ]
    for owner in owners:
        setup.steps.append(
            Step("schemas", False, f"ember's schemas here belong to role {owner}, not {role}")
        )
        setup.why.append(
            f"Another role ({owner}) made ember's schemas in this database. To share them, "
            f"{role} becomes a member of {owner} and every proxy of the team works as "
            f"{owner}: add ?options=-c%20role%3D{urllib.parse.quote(owner)} to store_url "
            "(or give each team its own database)."
        )
        setup.sql.append(f"GRANT {quoted(owner)} TO {quoted(role)};")
    return True


def _home(conn: Any, setup: Setup) -> None:
    """ember's home schema (stats, learned state), made and brought up to date."""
    from ember.store.pg.migrate import migrate
    from ember.store.pg.names import HOME_SCHEMA
    from ember.store.schema import PG_STATS

    done = migrate(conn, HOME_SCHEMA, PG_STATS)
    detail = f"{len(done)} migrations applied" if done else "up to date"
    setup.steps.append(Step("schema", True, f"{HOME_SCHEMA}: {detail}"))
