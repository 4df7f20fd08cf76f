"""What ``ember store copy`` leaves out is named, and why: a table a trigger keeps (its rows
would be counted twice) or an index (rebuilt, never copied). Fails the day a feature that
(or any feature: a SQLite home copies to another) brings a trigger-kept table nobody named."""

from __future__ import annotations

from ember.features import registered
from ember.store.copy import policy
from ember.store.schema import PG_PROJECT, PG_STATS, PROJECT, STATS


def _named() -> set[str]:
    named = set(policy.DERIVED) | set(policy.OWNED_ROWS)
    for feature in registered():
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
    for feature in registered():
        if feature.derived():
            assert feature.rebuild is not None, feature.name


def test_the_trigger_parser_reads_both_dialects() -> None:
    sqlite = "CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = 1; END;"
    pg = "CREATE FUNCTION f() RETURNS trigger AS $$ BEGIN INSERT INTO c AS s VALUES (1); END $$;"
    assert policy.trigger_written(sqlite) == {"b"}
    assert policy.trigger_written(pg) == {"c"}
    assert policy.trigger_written("CREATE TABLE d (x INT); INSERT INTO d VALUES (1);") == set()
