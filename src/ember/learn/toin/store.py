"""TOIN's table in ``stats.db``: merging observations in, keeping it bounded, export, import.

Every function here is a job for the database's writer (or a read) over one connection; the
callers (the stage, the CLI) pick the ``Database``. Bounded: after a merge the table is pruned
to ``MAX_PATTERNS`` rows and ``MAX_BYTES`` of stored text, the least observed (then the
longest unseen) patterns first -- TOIN is a diagnostic learning store, not an archive.

Export and import exchange patterns only (hashes and statistics), so instances can pool what
they learned without sharing any data. An export carries an id; importing the same export
twice is refused rather than counted twice.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ember.learn.toin.keys import PatternKey
from ember.learn.toin.patterns import Pattern
from ember.stats import RunningStats
from ember.store.driver import Connection
from ember.store.sql import one_writer

MAX_PATTERNS = 10_000
MAX_BYTES = 128 * 1024 * 1024
#: Pruning goes below the limit by this share, so it does not run on every merge after.
PRUNE_TO = 0.9
#: Bytes a row costs besides its text columns (key parts, numbers, index entry), roughly.
ROW_OVERHEAD = 96

EXPORT_FORMAT = "ember-toin"
EXPORT_VERSION = 1

_COLUMNS = (
    "auth_mode, model_family, structure_hash, kind, observations, refetches, errors, "
    "size_n, size_mean, size_m2, fields, queries, instances, user_count, first_seen, last_seen"
)
_KEY = "auth_mode, model_family, structure_hash"
#: A merged row replaces the stored one: an upsert both SQLite and PostgreSQL
#: run, where ``INSERT OR REPLACE`` is SQLite's alone.
_UPSERT = (
    f"INSERT INTO toin_patterns ({_COLUMNS}) VALUES ({','.join('?' * 16)}) "
    f"ON CONFLICT ({_KEY}) DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}"
        for c in (c.strip() for c in _COLUMNS.split(","))
        if c not in _KEY.split(", ")
    )
)
_ROW_BYTES = (
    f"{ROW_OVERHEAD} + length(kind) + length(fields) + length(queries) + length(instances)"
    " + length(auth_mode) + length(model_family) + length(structure_hash)"
)


class ToinImportError(ValueError):
    """An export file that cannot be imported; the message says why."""


def _row(p: Pattern) -> tuple[Any, ...]:
    k = p.key
    return (
        k.auth_mode,
        k.model_family,
        k.structure_hash,
        p.kind,
        p.observations,
        p.refetches,
        p.errors,
        p.size.n,
        p.size.mean,
        p.size.m2,
        json.dumps(dict(p.fields), sort_keys=True),
        json.dumps(dict(p.queries), sort_keys=True),
        json.dumps(list(p.instances)),
        p.user_count,
        p.first_seen,
        p.last_seen,
    )


def _pattern(r: Any) -> Pattern:
    return Pattern(
        key=PatternKey(r["auth_mode"], r["model_family"], r["structure_hash"]),
        kind=r["kind"],
        observations=r["observations"],
        refetches=r["refetches"],
        errors=r["errors"],
        size=RunningStats(r["size_n"], r["size_mean"], r["size_m2"]),
        fields=Counter(json.loads(r["fields"])),
        queries=Counter(json.loads(r["queries"])),
        instances=tuple(json.loads(r["instances"])),
        user_count=r["user_count"],
        first_seen=r["first_seen"],
        last_seen=r["last_seen"],
    )


def instance_hash(conn: Connection) -> str:
    """This instance's hash (a random id made on first use; writer job). The id is inserted
    only when there is none and then read back: two proxies on one PostgreSQL store making it
    at once agree on the one that was committed first, rather than one failing on the key."""
    conn.execute(
        "INSERT INTO toin_meta (key, value) VALUES ('instance', ?) ON CONFLICT (key) DO NOTHING",
        (secrets.token_hex(16),),
    )
    row = conn.execute("SELECT value FROM toin_meta WHERE key='instance'").fetchone()
    ident = str(row[0])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def merge_patterns(conn: Connection, patterns: Iterable[Pattern]) -> int:
    """Merge ``patterns`` into the table (writer job); returns the rows pruned after. Each
    stored row is read, merged and written back under ``one_writer``: two proxies on one
    PostgreSQL store merging the same pattern add up, as on SQLite."""
    one_writer(conn)
    for p in patterns:
        k = p.key
        r = conn.execute(
            f"SELECT {_COLUMNS} FROM toin_patterns "
            "WHERE auth_mode=? AND model_family=? AND structure_hash=?",
            (k.auth_mode, k.model_family, k.structure_hash),
        ).fetchone()
        merged = _pattern(r).merged(p) if r is not None else p
        conn.execute(_UPSERT, _row(merged))
    return prune(conn)


def table_size(conn: Connection) -> tuple[int, int]:
    """(patterns, estimated bytes) of the table."""
    n, size = conn.execute(
        f"SELECT COUNT(*), COALESCE(SUM({_ROW_BYTES}), 0) FROM toin_patterns"
    ).fetchone()
    return int(n), int(size)


def prune(conn: Connection, max_patterns: int = MAX_PATTERNS, max_bytes: int = MAX_BYTES) -> int:
    """Drop the least observed, then longest unseen, patterns until both limits hold with
    ``PRUNE_TO`` to spare; returns how many went."""
    n, size = table_size(conn)
    if n <= max_patterns and size <= max_bytes:
        return 0
    keep_n, keep_bytes = int(max_patterns * PRUNE_TO), int(max_bytes * PRUNE_TO)
    doomed: list[tuple[str, str, str]] = []
    rows = conn.execute(
        f"SELECT auth_mode, model_family, structure_hash, {_ROW_BYTES} AS b FROM toin_patterns "
        "ORDER BY observations ASC, last_seen ASC"
    )
    for r in rows:
        if n <= keep_n and size <= keep_bytes:
            break
        doomed.append((r[0], r[1], r[2]))
        n, size = n - 1, size - int(r[3])
    conn.executemany(
        "DELETE FROM toin_patterns WHERE auth_mode=? AND model_family=? AND structure_hash=?",
        doomed,
    )
    return len(doomed)


def load_patterns(conn: Connection) -> list[Pattern]:
    """Every pattern, sorted by key."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM toin_patterns ORDER BY auth_mode, model_family, structure_hash"
    )
    return [_pattern(r) for r in rows]


def export_doc(conn: Connection, now: float | None = None) -> dict[str, Any]:
    """The whole table as an export document (writer job: it may create the instance id)."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "export_id": secrets.token_hex(8),
        "instance": instance_hash(conn),
        "exported_at": time.time() if now is None else now,
        "patterns": [p.to_json() for p in load_patterns(conn)],
    }


@dataclass(frozen=True)
class ImportResult:
    export_id: str
    patterns: int
    new_patterns: int
    pruned: int


def parse_export(doc: Any) -> tuple[str, list[Pattern]]:
    """(export id, patterns) of an export document; raises ``ToinImportError``."""
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise ToinImportError(f"not an ember TOIN export (expected format {EXPORT_FORMAT!r})")
    if doc.get("version") != EXPORT_VERSION:
        raise ToinImportError(f"unsupported TOIN export version {doc.get('version')!r}")
    export_id = doc.get("export_id")
    if not isinstance(export_id, str) or not export_id.isalnum():
        raise ToinImportError("the export has no valid export_id")
    raw = doc.get("patterns")
    if not isinstance(raw, list):
        raise ToinImportError("the export has no pattern list")
    try:
        return export_id, [Pattern.from_json(p) for p in raw]
    except ValueError as exc:
        raise ToinImportError(f"pattern {exc}") from exc


def import_doc(conn: Connection, doc: Any) -> ImportResult:
    """Merge another instance's export (writer job), weighted by sample size."""
    export_id, patterns = parse_export(doc)
    one_writer(conn)  # two imports of one export at once: the second sees the first's mark
    mark = f"import:{export_id}"
    if conn.execute("SELECT 1 FROM toin_meta WHERE key=?", (mark,)).fetchone():
        raise ToinImportError(f"export {export_id} was already imported; nothing done")
    before = {(p.key.auth_mode, p.key.model_family, p.key.structure_hash) for p in patterns}
    known = sum(
        1
        for k in before
        if conn.execute(
            "SELECT 1 FROM toin_patterns WHERE auth_mode=? AND model_family=? AND structure_hash=?",
            k,
        ).fetchone()
    )
    pruned = merge_patterns(conn, patterns)
    conn.execute("INSERT INTO toin_meta (key, value) VALUES (?, ?)", (mark, str(time.time())))
    return ImportResult(export_id, len(patterns), len(before) - known, pruned)
