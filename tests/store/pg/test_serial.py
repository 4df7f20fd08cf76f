"""Read-modify-write jobs of several processes on one PostgreSQL store add up, as they do on
SQLite's one writer (``store.pg.serial.one_writer``): a lesson's count, shaping's ledger and
a TOIN pattern lose nothing when two proxies write them at the same moment."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.learn.toin.keys import PatternKey
from ember.learn.toin.patterns import Pattern
from ember.learn.toin.store import load_patterns, merge_patterns
from ember.memory.models import Evidence
from ember.shaping.state import ShapingState
from ember.store.database import Database
from ember.store.pg.database import PgDatabase
from ember.store.pg.names import schema_name
from ember.store.schema import PROJECT, STATS, for_postgres
from ember.traffic.learner import MIN_EVIDENCE
from ember.traffic.patterns import Category, Observation
from ember.traffic.sightings import Sightings, load

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

PROXIES = 2
EACH = 25


@pytest.fixture
def owners(pg_url: str, tmp_path: Path) -> Iterator[Callable[[Path], list[Database]]]:
    """``owners(path)``: one owner of ``path``'s schema per proxy (each its own pool)."""
    opened: list[Database] = []

    def make(path: Path) -> list[Database]:
        schema = STATS if path.name == "stats.db" else PROJECT
        dbs: list[Database] = [
            PgDatabase(
                path,
                for_postgres(schema),
                url=pg_url,
                schema_name=schema_name(tmp_path, path),
                log_failures=False,
            )
            for _ in range(PROXIES)
        ]
        opened.extend(dbs)
        dbs[0].read(lambda c: None)  # migrated once before the race
        return dbs

    yield make
    for db in opened:
        db.close()


def _race(dbs: list[Database], job: Callable[[Any], Any]) -> None:
    """Each owner writes ``job`` ``EACH`` times, all owners at once."""
    start = threading.Barrier(len(dbs))
    failures: list[BaseException] = []

    def proxy(db: Database) -> None:
        start.wait()
        try:
            for _ in range(EACH):
                db.write(job)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=proxy, args=(db,)) for db in dbs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures


def test_shaping_documents_add_up(owners: Callable[[Path], list[Database]], tmp_path: Path) -> None:
    dbs = owners(tmp_path / "stats.db")
    states = [ShapingState(tmp_path, lambda db=db: db) for db in dbs]
    start = threading.Barrier(PROXIES)

    def proxy(state: ShapingState) -> None:
        start.wait()
        for _ in range(EACH):
            state.update("ledger", lambda doc: {"n": (doc or {"n": 0})["n"] + 1})

    threads = [threading.Thread(target=proxy, args=(s,)) for s in states]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert states[0].read("ledger") == {"n": PROXIES * EACH}


def test_toin_patterns_add_up(owners: Callable[[Path], list[Database]], tmp_path: Path) -> None:
    dbs = owners(tmp_path / "stats.db")

    def one(conn: Any) -> int:
        p = Pattern(PatternKey("api_key", "claude-sonnet", "ab"), "text:grep")
        p.observe(100, False, (), 1.0)
        return merge_patterns(conn, [p])

    _race(dbs, one)
    [stored] = dbs[0].read(load_patterns)
    assert stored.observations == PROXIES * EACH


def test_a_lessons_sightings_add_up(
    owners: Callable[[Path], list[Database]], tmp_path: Path
) -> None:
    dbs = owners(tmp_path / "projects" / "acme-0123456789abcdef" / "ember.db")
    book = Sightings(min_evidence={c: 10**6 for c in MIN_EVIDENCE})  # never handed out
    seen = itertools.count()

    def sighting(conn: Any) -> object:
        # each sighting rests on a message of its own: one message counts once
        evidence = (Evidence("tool-verified", f"m{next(seen)}"),)
        return book.record(conn, [Observation(Category.ENVIRONMENT, "k", "fact", evidence)], 1000.0)

    _race(dbs, sighting)
    entry = dbs[0].read(lambda c: load(c, "k"))
    assert entry is not None and entry.count == PROXIES * EACH
