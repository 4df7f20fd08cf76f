"""What ``ember doctor`` looks at when ``store_url`` is set: the PostgreSQL store, not files.

With ``store_url`` the proxy keeps everything in the server, one schema per project and
``ember_home`` for what ``stats.db`` holds; a doctor that examined ``EMBER_HOME``'s files
would report a healthy home whatever state the store is in (or stale files the proxy no
longer writes). So the findings are about the server:

- the store: reachable (an unreachable server is one finding with its fix, never a
  traceback), the server's version, and pgvector (memory's vectors need the extension);
- each of ember's schemas: its migrations applied against the list this ember applies there
  (``schema.for_postgres``), what a newer ember wrote, its rows, and any problem a proxy
  recorded for it.

Invariants, and what each prevents:

- Read-only: one autocommit connection, ``SELECT`` only, no schema is created or migrated,
  so the doctor is safe next to running proxies and shows the state they left.
- No secret is shown: the store is named by ``url.redacted`` (no password) and a server's
  error text has the URL's password replaced before it is shown (a libpq message can quote
  the connection string it was given).
- Every wait is bounded (``pool.bounded``: connect and statement timeouts): a server that
  does not answer is a finding after seconds, not a doctor that hangs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember.store.inspect import Finding
from ember.store.migrations import Schema
from ember.store.pg.failures import classify
from ember.store.pg.names import GLOBAL_SCHEMA, HOME_SCHEMA
from ember.store.pg.url import redacted, scrubbed, where
from ember.store.registry import read_problems
from ember.store.schema import PROJECT, STATS, for_postgres

#: ember's schemas: ``ember_home``, ``ember_global``, ``ember_p_*`` (projects), ``ember_f_*``.
#: Wider than ``catalog.schemas`` on purpose: a schema a crashed start left unmigrated is
#: never a project to the dashboard or a copy, but it is a finding for the doctor.
_OURS = r"SELECT nspname FROM pg_namespace WHERE nspname ~ '^ember_(home|global|p_|f_)' ORDER BY 1"
#: (what is counted, its table, which rows)
_COUNTS = (
    ("accounting rows", "exchanges", "TRUE"),
    ("memories", "memories", "valid_until IS NULL"),
)


def examine_store(url: str, home: Path, only: str | None = None) -> list[Finding]:
    """The doctor's findings on the store of ``url``: the server, then each of ember's
    schemas (``only``: that schema alone)."""
    import psycopg

    from ember.store.pg.pool import bounded

    store = redacted(url)
    try:
        conn = psycopg.connect(bounded(url), autocommit=True)
    except psycopg.Error as exc:
        return [_unreachable(store, url, exc)]
    try:
        findings = [_server(conn, store)]
        names = [str(r[0]) for r in conn.execute(_OURS).fetchall()]
        if only is not None:
            if only not in names:
                detail = "no schema yet: nothing was recorded for it (created on first use)"
                return [*findings, Finding(where(only, url), True, detail)]
            names = [only]
        recorded = read_problems(home)
        findings.extend(_schema(conn, url, name, recorded) for name in names)
        if not names:
            findings.append(Finding(store, True, "no ember schema yet: created on first use"))
        return findings
    except psycopg.Error as exc:
        return [_unreachable(store, url, exc)]
    finally:
        conn.close()


def _unreachable(store: str, url: str, exc: BaseException) -> Finding:
    state = classify(exc) or "unreachable"
    detail = f"PostgreSQL store {store}: {state}: {scrubbed(str(exc).strip(), url)}"
    fix = (
        "check that the server of store_url (EMBER_STORE_URL) is running and reachable from "
        "here and that its role may log in; a running proxy forwards requests meanwhile and "
        "holds its writes"
    )
    if state == "unwritable":
        fix = "grant the role of store_url the right to create schemas and write in them"
    return Finding(store, False, detail, fix)


def _server(conn: Any, store: str) -> Finding:
    version = str(conn.execute("SHOW server_version").fetchone()[0])
    ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if ext is None:
        return Finding(
            store,
            False,
            f"PostgreSQL {version} reachable; pgvector is not installed in this database "
            "(memory's vectors need it)",
            "as a superuser: CREATE EXTENSION vector; in this database (the package is "
            "pgvector, e.g. postgresql-16-pgvector)",
        )
    return Finding(store, True, f"PostgreSQL {version} reachable; pgvector {ext[0]}")


def _expected(name: str) -> Schema:
    return for_postgres(STATS if name == HOME_SCHEMA else PROJECT)


def _schema(conn: Any, url: str, name: str, recorded: dict[str, Any]) -> Finding:
    """One schema: its migrations against this ember's list, its rows, recorded problems."""
    from psycopg import sql

    subject = where(name, url)
    found = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = '_migrations'", (name,)
    ).fetchone()
    if found is None:
        return Finding(subject, True, "no migrations yet (applied at next open)")
    rows = conn.execute(sql.SQL("SELECT name FROM {}._migrations").format(sql.Identifier(name)))
    applied = [str(r[0]) for r in rows]
    schema = _expected(name)
    known = {m.name for m in schema.migrations}
    pending = [m.name for m in schema.migrations if m.name not in set(applied)]
    newer = [n for n in applied if n not in known]
    notes = [f"{len(applied) - len(newer)}/{len(schema.migrations)} migrations"]
    if pending:
        notes.append(f"{len(pending)} applied at next open ({', '.join(pending[:4])})")
    if newer:
        notes.append(f"written by a newer ember ({', '.join(newer)})")
    notes.extend(_counts(conn, name))
    problem = recorded.get(subject)
    if isinstance(problem, dict) and problem.get("state") not in (None, "ok"):
        notes.append(
            f"a proxy switched it off earlier ({problem.get('state')}: "
            f"{scrubbed(str(problem.get('detail')), url)}) and it answers now"
        )
    kind = "stats" if name == HOME_SCHEMA else "global" if name == GLOBAL_SCHEMA else "project"
    return Finding(subject, True, f"{kind} schema; " + "; ".join(notes))


def _counts(conn: Any, name: str) -> list[str]:
    from psycopg import sql

    notes = []
    for label, table, rows in _COUNTS:
        there = conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (name, table)
        ).fetchone()
        if there is not None:
            query = sql.SQL("SELECT COUNT(*) FROM {}.{} WHERE " + rows)
            count = conn.execute(query.format(sql.Identifier(name), sql.Identifier(table)))
            notes.append(f"{count.fetchone()[0]} {label}")
    return notes
