"""What ``ember store copy`` leaves out is named, and why: a table a trigger keeps (its rows
would be counted twice) or an index (rebuilt, never copied). Fails the day a feature that
(or any feature: a SQLite home copies to another) brings a trigger-kept table nobody named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember import compose
from ember.store.copy import policy
from ember.store.schema import PG_PROJECT, PG_STATS, PROJECT, STATS


def _named() -> set[str]:
    named = set(policy.DERIVED) | set(policy.OWNED_ROWS)
    for feature in compose.spec().features:
        named |= set(feature.derived())
    return named


def test_every_table_a_trigger_writes_is_named() -> None:
    written: dict[str, str] = {}
    for schema in (PROJECT, STATS, PG_PROJECT, PG_STATS):
        for m in schema.migrations:
            for table in policy.trigger_written(m.sql) | policy.trigger_written(m.postgres or ""):
                written.setdefault(table, m.name)
    assert {"spend_hours", "memory_meta"} <= written.keys()  # the parser finds what is there
    unnamed = {t: m for t, m in written.items() if t not in _named()}
    assert not unnamed, (
        f"tables written by triggers {unnamed}: name them in store/copy/policy.py (DERIVED or "
        "OWNED_ROWS) or in their feature's Feature.derived, or the copy counts them twice"
    )


def test_every_feature_with_derived_tables_rebuilds_them() -> None:
    for feature in compose.spec().features:
        if feature.derived():
            assert feature.rebuild is not None, feature.name


def test_the_trigger_parser_reads_both_dialects() -> None:
    sqlite = "CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = 1; END;"
    pg = "CREATE FUNCTION f() RETURNS trigger AS $$ BEGIN INSERT INTO c AS s VALUES (1); END $$;"
    assert policy.trigger_written(sqlite) == {"b"}
    assert policy.trigger_written(pg) == {"c"}
    assert policy.trigger_written("CREATE TABLE d (x INT); INSERT INTO d VALUES (1);") == set()


def _fresh(tmp_path: Path) -> dict[str, Any]:
    """Every table of a new project and stats file: (its columns' declared types, its
    primary key, its foreign keys)."""
    from ember.store.database import Database

    out: dict[str, Any] = {}
    for name, schema in (("p.db", PROJECT), ("s.db", STATS)):
        db = Database(tmp_path / name, schema, log_failures=False)
        try:
            db.write(lambda c: c.execute("SELECT 1"))
            out.update(db.read(_shapes))
        finally:
            db.close()
    return out


def _shapes(conn: Any) -> dict[str, Any]:
    from ember.store.copy import catalog

    out = {}
    for table in catalog.tables(conn, "sqlite"):  # the tables a copy copies (no index's own)
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        fks = {str(f[3]) for f in conn.execute(f'PRAGMA foreign_key_list("{table}")').fetchall()}
        types = {str(c[1]): str(c[2]).upper() for c in info}
        key = [str(c[1]) for c in info if c[5]]
        out[str(table)] = (types, key, fks)
    return out


def test_every_table_the_store_numbers_says_how_its_rows_are_found(tmp_path: Path) -> None:
    """A table keyed by a number the store hands out (an INTEGER PRIMARY KEY that is not a
    reference) must be in ``RENUMBERED``: copied as is into a store in use, its rows would
    collide with the target's under the same numbers and none would be copied."""
    unnamed = []
    for table, (types, key, fks) in _fresh(tmp_path).items():
        if len(key) != 1 or types[key[0]] != "INTEGER" or key[0] in fks:
            continue
        if table in policy.BOOKKEEPING or table in _named() or table in policy.FIXED_KEYS:
            continue
        if table not in policy.RENUMBERED:
            unnamed.append(table)
    assert not unnamed, (
        f"tables numbered by the store {unnamed}: name them in store/copy/policy.py "
        "RENUMBERED (with the columns that identify a row) or FIXED_KEYS"
    )
    shapes = _fresh(tmp_path)
    for table, spec in policy.RENUMBERED.items():
        types, key, _ = shapes[table]
        assert key == [spec.key] and set(spec.natural) <= types.keys(), table


def test_every_column_that_holds_a_transcript_position_is_mapped(tmp_path: Path) -> None:
    """An INTEGER column named like a position (``*_seq``) that is neither a key nor a
    foreign key holds a number of a renumbered table with nothing to say so: it must be a
    ``WATERMARKS`` entry, or a merge leaves it pointing at another home's messages."""
    found = []
    for table, (types, key, fks) in _fresh(tmp_path).items():
        for column, kind in types.items():
            if not column.endswith("seq") or kind != "INTEGER" or column in key or column in fks:
                continue
            if column not in policy.WATERMARKS.get(table, {}):
                found.append(f"{table}.{column}")
    assert not found, f"positions no foreign key declares: {found}; add them to WATERMARKS"


def test_every_identity_column_on_postgres_is_renumbered() -> None:
    import re

    made = re.compile(r"CREATE TABLE (\w+) \(\s*(\w+) BIGINT GENERATED", re.I)
    for schema in (PG_PROJECT, PG_STATS):
        for m in schema.migrations:
            for table, column in made.findall(m.postgres or ""):
                assert table in policy.RENUMBERED, table
                assert policy.RENUMBERED[table].key == column, table
