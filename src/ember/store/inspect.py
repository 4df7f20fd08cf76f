"""What ``ember doctor`` looks at in ``EMBER_HOME``: the home itself and every database.

Read-only: every check opens files read-only (at the file level: a reader never checkpoints)
and never migrates, so running the doctor next to a live proxy is safe, and a damaged WAL is
still there for ``--recover``. Each finding says what is wrong and what to do.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.errors import StorageError
from ember.store.driver import connect, driver_name, errors, vec_status
from ember.store.fileguard import WAL_READ_BYTES, in_use
from ember.store.health import Health, classify
from ember.store.home import check_home
from ember.store.migrations import Schema
from ember.store.pages import read_wal
from ember.store.registry import read_problems, stats_db_path
from ember.store.schema import PROJECT, STATS


@dataclass
class Finding:
    subject: str
    ok: bool
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def databases(home: Path) -> list[tuple[Path, Schema]]:
    """Every database ember keeps under ``home``, with its schema."""
    found: list[tuple[Path, Schema]] = []
    if stats_db_path(home).is_file():
        found.append((stats_db_path(home), STATS))
    if (home / "global" / "ember.db").is_file():
        found.append((home / "global" / "ember.db", PROJECT))
    projects = home / "projects"
    if projects.is_dir():
        found.extend((p, PROJECT) for p in sorted(projects.glob("*/ember.db")) if p.is_file())
    return found


def schema_for(path: Path) -> Schema:
    return STATS if path.name == stats_db_path(path.parent).name else PROJECT


def check_home_finding(home: Path) -> Finding:
    try:
        check_home(home)
    except StorageError as exc:
        return Finding(str(home), False, str(exc), "see the message")
    return Finding(str(home), True, "EMBER_HOME is a writable directory with room to grow")


def check_database(path: Path, schema: Schema, recorded: dict[str, Any] | None) -> Finding:
    """Integrity, schema version and what a proxy reported about ``path``."""
    notes: list[str] = []
    live = in_use(path)
    if live:
        notes.append("open by a running ember process")
    wal = None if live else _wal_damage(path)
    if wal is not None:
        return _bad(path, Health(str(path), "corrupt", wal), notes)
    try:
        conn = connect(path, readonly=True).conn
    except errors.Error as exc:
        return _damaged(path, exc, notes)
    try:
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)")]
        if check != ["ok"]:
            detail = "; ".join(check[:3]) + (" ..." if len(check) > 3 else "")
            return _bad(path, Health(str(path), "corrupt", detail), notes)
        notes.extend(_schema_notes(conn, schema))
        notes.extend(_counts(conn))
    except errors.Error as exc:
        return _damaged(path, exc, notes)
    finally:
        conn.close()
    if recorded is not None and recorded.get("state") not in (None, "ok"):
        notes.append(
            f"a proxy switched it off earlier ({recorded.get('state')}: {recorded.get('detail')})"
            " and it checks out now: restart the proxy to use it again"
        )
    return Finding(str(path), True, "integrity ok; " + "; ".join(notes))


def _wal_damage(path: Path) -> str | None:
    """What is wrong with the WAL a stopped process left (None: nothing). Opening the file
    would hide it: SQLite's recovery stops at the first bad frame without a word."""
    wal = Path(str(path) + "-wal")
    try:
        if wal.stat().st_size > WAL_READ_BYTES:
            return None
        scan = read_wal(wal.read_bytes())
    except OSError:
        return None
    return f"the WAL is damaged: {scan.damage}" if scan.unverifiable else None


def _damaged(path: Path, exc: Exception, notes: list[str]) -> Finding:
    state = classify(exc) or "corrupt"
    return _bad(path, Health(str(path), state, str(exc)), notes)


def _bad(path: Path, health: Health, notes: list[str]) -> Finding:
    detail = f"{health.state}: {health.detail}"
    if notes:
        detail += "; " + "; ".join(notes)
    return Finding(str(path), False, detail, health.fix())


def _schema_notes(conn: Any, schema: Schema) -> list[str]:
    try:
        applied = [str(r[0]) for r in conn.execute("SELECT name FROM _migrations")]
    except errors.Error:
        return ["no schema yet (created on first use)"]
    known = {m.name for m in schema.migrations}
    newer = [n for n in applied if n not in known]
    pending = [m.name for m in schema.migrations if m.name not in set(applied)]
    notes = [f"schema {len(applied)}/{len(schema.migrations)} migrations"]
    if pending:
        notes.append(f"{len(pending)} applied at next open")
    if newer:
        notes.append(f"written by a newer ember ({', '.join(newer)})")
    return notes


def _counts(conn: Any) -> list[str]:
    notes = []
    for label, sql in (
        ("accounting rows", "SELECT COUNT(*) FROM exchanges"),
        ("memories", "SELECT COUNT(*) FROM memories WHERE valid_until IS NULL"),
    ):
        with contextlib.suppress(errors.Error):
            notes.append(f"{conn.execute(sql).fetchone()[0]} {label}")
    return notes


def check_sqlite() -> Finding:
    """The one SQLite library and whether it can load sqlite-vec."""
    problem = vec_status()
    if problem:
        return Finding(
            "sqlite",
            False,
            f"{driver_name()}; sqlite-vec cannot load ({problem})",
            "pip install sqlite-vec sqlean.py (memory then uses the hnswlib fallback)",
        )
    return Finding("sqlite", True, f"{driver_name()}; sqlite-vec loads")


def examine(home: Path, only: Path | None = None) -> list[Finding]:
    """The doctor's findings: the home, the SQLite library, then each database."""
    findings = [check_home_finding(home), check_sqlite()]
    recorded = read_problems(home)
    targets = [(only, schema_for(only))] if only is not None else databases(home)
    if only is not None and not only.is_file():
        findings.append(Finding(str(only), False, "no such database", "check the path"))
        return findings
    findings.extend(check_database(p, s, recorded.get(str(p))) for p, s in targets)
    return findings
