"""Sightings in the project's own file: they outlive the process, stay in their project and
stay bounded — on SQLite and, with ``store_url``, in the project's PostgreSQL schema (every
test runs on both: ``open_db``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.memory.models import Evidence
from ember.store.database import Database
from ember.store.driver import Connection, errors
from ember.store.schema import PROJECT
from ember.traffic import sightings
from ember.traffic.learner import DAY
from ember.traffic.patterns import Category, Observation
from ember.traffic.sightings import Sightings, load
from tests.memory.conftest import pg_database


def obs(key: str, mid: str, category: Category = Category.ENVIRONMENT) -> Observation:
    return Observation(category, key, f"fact {key}", (Evidence("tool-verified", message_id=mid),))


@pytest.fixture
def opened() -> Iterator[list[Database]]:
    dbs: list[Database] = []
    yield dbs
    for db in dbs:
        db.close()


OpenDb = Callable[[Path, list[Database]], Database]


@pytest.fixture(params=["sqlite", "postgres"])
def open_db(request: pytest.FixtureRequest, tmp_path: Path) -> OpenDb:
    """A new owner of the file (or of the schema its path names): what a restarted proxy
    has."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None

    def opener(path: Path, opened: list[Database]) -> Database:
        db = Database(path, PROJECT) if url is None else pg_database(url, tmp_path, path)
        opened.append(db)
        return db

    return opener


def record(db: Database, *found: Observation, now: float = 1000.0, **kw: Any) -> list[Observation]:
    book = Sightings(**kw)
    return db.write(lambda c: book.record(c, found, now))


def rows(db: Database) -> list[tuple[Any, ...]]:
    return db.read(
        lambda c: [
            tuple(r)
            for r in c.execute("SELECT key, count, saved FROM traffic_sightings ORDER BY key")
        ]
    )


def test_a_lesson_seen_once_before_a_restart_and_once_after_is_handed_out_with_both_pointers(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    path = tmp_path / "p" / "ember.db"
    path.parent.mkdir()
    first = open_db(path, opened)
    assert record(first, obs("k", "m1")) == []
    first.close()
    ready = record(open_db(path, opened), obs("k", "m2"))
    assert [f.key for f in ready] == ["k"]
    assert [p.message_id for p in ready[0].evidence] == ["m1", "m2"]


def test_a_lesson_handed_out_before_a_restart_is_not_handed_out_again(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    path = tmp_path / "ember.db"
    first = open_db(path, opened)
    assert record(first, obs("k", "m1"), obs("k", "m2")) != []
    first.close()
    again = open_db(path, opened)
    assert record(again, obs("k", "m3")) == []
    assert record(again, obs("k", "m4")) == []
    assert rows(again) == [("k", 4, 1)]


def seen(db: Database) -> list[tuple[str, str]]:
    return db.read(
        lambda c: [
            (r[0], r[1]) for r in c.execute("SELECT key, pointer FROM traffic_seen ORDER BY 1, 2")
        ]
    )


def test_a_message_counted_before_a_restart_is_not_counted_again(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    """A resumed session sends its history again through a new proxy: the mistake in it,
    made once, stays one sighting and is never handed out."""
    path = tmp_path / "ember.db"
    first = open_db(path, opened)
    assert record(first, obs("k", "m1")) == []
    first.close()
    again = open_db(path, opened)
    assert record(again, obs("k", "m1"), now=2000.0) == []
    assert record(again, obs("k", "m1"), obs("k", "m1"), now=3000.0) == []
    assert rows(again) == [("k", 1, 0)]
    # a new message is a new sighting, handed out with the first one's evidence
    ready = record(again, obs("k", "m2"), now=4000.0)
    assert [p.message_id for p in ready[0].evidence] == ["m1", "m2"]


def test_a_sighting_counts_once_per_message_it_names_not_per_evidence(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    """``seen`` names the message as a replay does; two transcript ids for it (a resumed
    session under a new session id records its history again) are still one sighting."""
    db = open_db(tmp_path / "ember.db", opened)
    first = Observation(Category.ENVIRONMENT, "k", "f", obs("k", "m1").evidence, "call:toolu_1")
    resumed = Observation(Category.ENVIRONMENT, "k", "f", obs("k", "m9").evidence, "call:toolu_1")
    assert record(db, first) == []
    assert record(db, resumed) == []
    assert rows(db) == [("k", 1, 0)]
    assert seen(db) == [("k", "call:toolu_1")]


def test_one_message_is_a_sighting_of_each_lesson_it_teaches(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    record(db, obs("a", "m1"), obs("b", "m1"))
    assert rows(db) == [("a", 1, 0), ("b", 1, 0)]


def test_a_lesson_keeps_the_messages_of_its_most_recent_sightings_only(
    tmp_path: Path, opened: list[Database], open_db: OpenDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sightings, "MAX_SEEN_PER_LESSON", 3)
    db = open_db(tmp_path / "ember.db", opened)
    for i in range(6):
        record(db, obs("k", f"m{i}"), now=1000.0 + i)
    assert seen(db) == [("k", "m3"), ("k", "m4"), ("k", "m5")]
    assert rows(db) == [("k", 6, 1)]


def test_sightings_in_one_project_never_count_in_another(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    a, b = open_db(tmp_path / "a.db", opened), open_db(tmp_path / "b.db", opened)
    assert record(a, obs("k", "m1")) == []
    assert record(b, obs("k", "m2")) == []
    assert rows(a) == rows(b) == [("k", 1, 0)]


def test_a_released_lesson_is_handed_out_at_its_next_sighting(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    book = Sightings()
    assert record(db, obs("k", "m1"), obs("k", "m2")) != []
    db.write(lambda c: book.release(c, ["k"]))  # its memory could not be written
    ready = record(db, obs("k", "m3"))
    assert [p.message_id for p in ready[0].evidence] == ["m1", "m2", "m3"]


def test_a_forgotten_lesson_is_learned_from_scratch(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    book = Sightings()
    assert record(db, obs("k", "m1"), obs("k", "m2")) != []
    db.write(lambda c: book.forget(c, ["k"]))  # its evidence did not hold
    assert record(db, obs("k", "m3")) == []
    assert [p.message_id for p in record(db, obs("k", "m4"))[0].evidence] == ["m3", "m4"]


def test_the_table_keeps_its_bounds_dropping_the_least_recently_seen(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    for i in range(3):  # three saved lessons
        record(db, obs(f"saved-{i}", "m1"), obs(f"saved-{i}", "m2"), now=float(i), max_saved=2)
    for i in range(50):  # endless one-off noise
        record(db, obs(f"noise-{i:02d}", "m"), now=100.0 + i, max_pending=10, max_saved=2)
    kept = rows(db)
    assert [k for k, _, saved in kept if saved] == ["saved-1", "saved-2"]
    assert [k for k, _, saved in kept if not saved] == [f"noise-{i}" for i in range(40, 50)]
    # the messages each lesson was counted for go with it
    assert sorted({k for k, _ in seen(db)}) == [k for k, _, _ in kept]


def test_lessons_not_seen_within_their_age_are_pruned(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    record(db, obs("recovery", "m", Category.ERROR_RECOVERY), obs("environment", "m"), now=0.0)
    record(db, obs("new", "m"), now=30 * DAY)  # a new row prunes
    assert [k for k, _, _ in rows(db)] == ["environment", "new"]
    record(db, obs("newer", "m"), now=100 * DAY)
    assert [k for k, _, _ in rows(db)] == ["new", "newer"]


def test_a_row_this_version_cannot_read_counts_as_never_seen(
    tmp_path: Path, opened: list[Database], open_db: OpenDb
) -> None:
    db = open_db(tmp_path / "ember.db", opened)

    def odd(c: Connection) -> None:
        c.execute(
            "INSERT INTO traffic_sightings VALUES "
            "('k', 'from-a-later-version', 'x', 1, '[{\"kind\": \"made-up\"}]', 0, 0, 0)"
        )

    db.write(odd)
    assert db.read(lambda c: load(c, "k")) is None
    assert record(db, obs("k", "m1")) == []
    assert rows(db) == [("k", 1, 0)]


@pytest.mark.parametrize(
    "values",
    [
        "('', 'environment', 'x', 1, '[]', 0, 0, 0)",  # no key
        "('k', 'environment', 'x', 0, '[]', 0, 0, 0)",  # never seen
        "('k', 'environment', 'x', 1, '{}', 0, 0, 0)",  # evidence not a list
        "('k', 'environment', 'x', 1, '[]', 2, 0, 0)",  # neither pending nor saved
        "('k', 'environment', 'x', 1, 'not json', 0, 0, 0)",  # evidence not JSON at all
    ],
)
def test_the_schema_refuses_a_row_that_breaks_its_invariants(
    tmp_path: Path, opened: list[Database], open_db: OpenDb, values: str
) -> None:
    db = open_db(tmp_path / "ember.db", opened)
    with pytest.raises((errors.IntegrityError, *_pg_integrity())):
        db.write(lambda c: c.execute(f"INSERT INTO traffic_sightings VALUES {values}"))


def _pg_integrity() -> tuple[type[Exception], ...]:
    """PostgreSQL's constraint violation, when its driver is installed."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.errors.CheckViolation,)
