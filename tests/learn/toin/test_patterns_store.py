"""Patterns: merging weighted by sample size, the confidence formula, a bounded table, export
and import between instances, and a stable published TOML."""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.learn.toin.keys import PatternKey
from ember.learn.toin.patterns import MAX_INSTANCES, Pattern, confidence
from ember.learn.toin.privacy import hash_name
from ember.learn.toin.publish import HEADER, render
from ember.learn.toin.store import (
    ToinImportError,
    export_doc,
    import_doc,
    load_patterns,
    merge_patterns,
    prune,
    table_size,
)
from ember.stats import RunningStats
from ember.store.database import Database
from ember.store.schema import STATS, for_postgres


def key(h: str, auth: str = "api_key", fam: str = "claude-sonnet") -> PatternKey:
    return PatternKey(auth, fam, h)


def pattern(h: str, sizes: list[int], refetches: int = 0, **kw: object) -> Pattern:
    p = Pattern(key(h, **kw), "json-object", refetches=refetches)  # type: ignore[arg-type]
    for i, s in enumerate(sizes):
        p.observe(s, error=False, fields=[hash_name("id")], now=1000.0 + i)
    return p


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """The home's stats.db, or a PostgreSQL store's ``ember_home`` (``store_url``)."""
    path = tmp_path / "stats.db"
    if request.param == "sqlite":
        d = Database(path, STATS)
    else:
        from ember.store.pg.database import PgDatabase
        from ember.store.pg.names import schema_name

        url = request.getfixturevalue("pg_url")
        d = PgDatabase(path, for_postgres(STATS), url=url, schema_name=schema_name(tmp_path, path))
    yield d
    d.close()


def test_confidence_grows_with_observations_and_users_and_stays_capped() -> None:
    assert confidence(0, 1) == 0.0
    assert confidence(50, 1) == pytest.approx(0.325)
    assert confidence(10**9, 1) < 0.65  # one user alone never passes 0.65
    assert confidence(50, 2) == pytest.approx(0.425)
    assert confidence(50, 10) == pytest.approx(0.625)  # the user bonus stops at 0.3
    assert 0.949 < confidence(10**9, 100) <= 0.95


def test_merge_is_weighted_by_sample_size() -> None:
    a, b = pattern("aa", [100] * 30, refetches=3), pattern("aa", [400] * 10, refetches=5)
    m = a.merged(b)
    assert m.observations == 40 and m.refetches == 8
    assert m.size.mean == pytest.approx((30 * 100 + 10 * 400) / 40)
    assert m.refetch_rate == pytest.approx(8 / 40)
    assert m.fields == Counter({hash_name("id"): 40})


def test_users_keep_counting_past_the_instances_remembered() -> None:
    p = pattern("aa", [1])
    p.instances = ("0",)
    for i in range(1, 150):
        other = pattern("aa", [1])
        other.instances = (format(i, "x"),)
        p = p.merged(other)
    assert len(p.instances) == MAX_INSTANCES and p.user_count == 150
    again = pattern("aa", [1])
    again.instances = ("5",)  # already known: no new user
    assert p.merged(again).user_count == 150


def test_an_import_cannot_smuggle_values_into_the_table() -> None:
    good = pattern("aa", [1]).to_json()
    for field, value in [
        ("fields", {"password=hunter2": 1}),
        ("queries", {"status:open": 1}),
        ("kind", "text: secret"),
        ("instances", ["alice@example.com"]),
        ("key", "api_key|claude-sonnet|/etc/passwd"),
    ]:
        with pytest.raises(ValueError):
            Pattern.from_json({**good, field: value})


def test_merge_into_the_table_adds_up(db: Database) -> None:
    db.write(lambda c: merge_patterns(c, [pattern("aa", [10, 20])]))
    db.write(lambda c: merge_patterns(c, [pattern("aa", [30]), pattern("bb", [5])]))
    [a, b] = db.read(load_patterns)
    assert (a.key.structure_hash, a.observations) == ("aa", 3)
    assert a.size.mean == pytest.approx(20)
    assert b.observations == 1 and a.fields[hash_name("id")] == 3


def test_the_table_is_bounded_least_observed_first(db: Database) -> None:
    many = [pattern(format(i, "04x"), [1] * (1 + i % 5)) for i in range(200)]
    db.write(lambda c: merge_patterns(c, many))
    pruned = db.write(lambda c: prune(c, max_patterns=100))
    patterns = db.read(load_patterns)
    assert pruned == 110 and len(patterns) == 90
    assert min(p.observations for p in patterns) >= 3  # the rarest went first
    _, size = db.read(table_size)
    pruned = db.write(lambda c: prune(c, max_bytes=size // 2))
    assert db.read(table_size)[1] <= size // 2 * 0.9 and pruned > 0


def test_export_then_import_pools_two_instances(tmp_path: Path, db: Database) -> None:
    other = Database(tmp_path / "other.db", STATS)
    try:
        other.write(lambda c: merge_patterns(c, [pattern("aa", [100] * 60)]))
        doc = other.write(export_doc)
    finally:
        other.close()
    db.write(lambda c: merge_patterns(c, [pattern("aa", [200] * 40), pattern("bb", [1])]))
    result = db.write(lambda c: import_doc(c, doc))
    assert (result.patterns, result.new_patterns) == (1, 0)
    a = db.read(load_patterns)[0]
    assert a.observations == 100 and a.size.mean == pytest.approx(140)
    with pytest.raises(ToinImportError, match="already imported"):
        db.write(lambda c: import_doc(c, doc))
    assert db.read(load_patterns)[0].observations == 100
    with pytest.raises(ToinImportError, match="not an ember TOIN export"):
        db.write(lambda c: import_doc(c, {"patterns": []}))


def test_publish_is_sorted_floored_stable_and_has_provenance() -> None:
    rows = [
        pattern("ff", [10] * 60, refetches=12),
        pattern("01", [10] * 80, auth="oauth"),
        pattern("02", [10] * 49),  # below the floor
        pattern("03", [10] * 70, auth="unknown", fam="unknown"),
    ]
    out = render(rows, 50)
    assert out.text.startswith(HEADER) and (out.rows, out.below_floor) == (3, 1)
    doc = tomllib.loads(out.text)
    keys = [(p["auth_mode"], p["model_family"], p["structure_hash"]) for p in doc["pattern"]]
    assert keys == sorted(keys) and ("api_key", "claude-sonnet", "02") not in keys
    ff = next(p for p in doc["pattern"] if p["structure_hash"] == "ff")
    assert ff["advice"] == "preserve" and ff["refetch_rate"] == pytest.approx(0.2)
    assert doc["meta"] == {
        "format": "ember-toin-recommendations",
        "version": 1,
        "min_observations": 50,
        "patterns": 3,
    }
    assert render(list(reversed(rows)), 50).text == out.text  # same table, same bytes
    assert render(rows, 50, include_unknown=False).unknown_left_out == 1


def test_the_running_stats_of_sizes_round_trip_through_the_table(db: Database) -> None:
    p = pattern("ab", [3, 5, 10])
    db.write(lambda c: merge_patterns(c, [p]))
    stored = db.read(load_patterns)[0].size
    assert isinstance(stored, RunningStats) and stored.n == 3
    assert stored.mean == pytest.approx(6)


@pytest.mark.parametrize(
    "structure", ["", "AB", "0g", "ab cd"], ids=["empty", "upper", "not-hex", "space"]
)
def test_the_schema_refuses_a_structure_hash_that_is_not_hex(db: Database, structure: str) -> None:
    with pytest.raises(Exception, match=r"(?i)check"):
        db.write(
            lambda c: c.execute(
                "INSERT INTO toin_patterns (auth_mode, model_family, structure_hash, kind, "
                "first_seen, last_seen) VALUES ('api_key', 'claude', ?, 'text', 0, 0)",
                (structure,),
            )
        )
    db.write(
        lambda c: c.execute(
            "INSERT INTO toin_patterns (auth_mode, model_family, structure_hash, kind, "
            "first_seen, last_seen) VALUES ('api_key', 'claude', '0af9', 'text', 0, 0)"
        )
    )
    assert [p.key.structure_hash for p in db.read(load_patterns)] == ["0af9"]


def test_the_instance_id_is_made_once_and_kept(db: Database) -> None:
    first = db.write(export_doc)["instance"]
    assert db.write(export_doc)["instance"] == first
