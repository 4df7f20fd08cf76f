"""The requests a memory went into and whether their answers cited it (``memory.injected``),
on both backends: read from the ledger and the transcript as recorded, kept once final, and
found for rows the ledger held before ``memory_injected`` existed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.memory.injected import keep, memory_use, session_injections
from ember.memory.ledger import InjectionLedger, LedgerEntry
from ember.memory.models import Memory
from ember.memory.retrieval.render import render_block
from ember.memory.used import WINDOW, injected_texts
from ember.store.database import Database
from ember.store.migrations import Schema
from ember.store.registry import Storage
from ember.store.schema import PG_PROJECT, PROJECT
from ember.store.transcript_rows import Row, insert_rows

SESSION = "0a1b2c3d-0000-4000-8000-00000000000a"
T0 = 1_790_000_000.0
LOGIN = Memory("m-login", "The login handler must reject an empty password with a 400.", T0, T0)
DEPLOY = Memory("m-deploy", "Releases deploy to eu-west-1 from a version tag.", T0, T0)
CITING = "I changed the login handler so an empty password gets a 400 instead of a crash."


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    owner = Storage(tmp_path, store_url=url)
    yield owner
    owner.close()


def record(storage: Storage, db: Path, index: int, memories: list[Memory]) -> None:
    entry = LedgerEntry(index, f"d{index}", render_block(memories), tuple(m.id for m in memories))
    asyncio.run(InjectionLedger(storage).record(db, SESSION, entry))
    assert storage.database(db).flush(10)


def answer(storage: Storage, db: Path, position: int, text: str) -> None:
    row = Row(f"a{position}", SESSION, 1, position, 0, "assistant", "assistant", f"d{position}",
              text)  # fmt: skip
    storage.database(db).write(lambda c: insert_rows(c, [row]))


def test_each_memorys_text_is_read_back_from_the_block_as_injected() -> None:
    block = render_block([LOGIN, DEPLOY])
    assert injected_texts(block, [LOGIN.id, DEPLOY.id]) == {
        LOGIN.id: LOGIN.content,
        DEPLOY.id: DEPLOY.content,
    }
    # a user-wide copy's line also stands for the fact it was promoted from, listed after it
    assert injected_texts(render_block([LOGIN]), [LOGIN.id, "m-origin"]) == {
        LOGIN.id: LOGIN.content,
        "m-origin": LOGIN.content,
    }
    assert injected_texts("", ["m-gone"]) == {}


def test_a_verdict_comes_from_the_records_and_is_kept_once_the_window_is_full(
    storage: Storage, tmp_path: Path
) -> None:
    db = tmp_path / "p" / "ember.db"
    record(storage, db, 0, [LOGIN, DEPLOY])
    read = lambda: storage.database(db).read(lambda c: memory_use(c, LOGIN.id))  # noqa: E731
    waiting = read()
    assert (waiting.requests, waiting.cited, waiting.unanswered) == (1, 0, 1)
    assert waiting.latest[0].cited is None and not waiting.settled  # no answer yet
    answer(storage, db, 1, CITING)
    answered = read()
    assert (answered.cited, answered.unanswered) == (1, 0)
    assert not answered.settled  # later answers of the window may still come
    [entry] = storage.database(db).read(lambda c: session_injections(c, SESSION))
    assert entry["cited_ids"] == [LOGIN.id] and entry["used"] is True
    for position in range(2, WINDOW + 1):
        answer(storage, db, position, "Running the tests now.")
    full = read()
    assert [i.cited for i in full.settled] == [True]
    storage.database(db).write(lambda c: keep(c, LOGIN.id, full.settled))
    kept = read()
    assert kept.cited == 1 and not kept.settled  # read from the row, not computed again
    deploy = storage.database(db).read(lambda c: memory_use(c, DEPLOY.id))
    assert (deploy.requests, deploy.cited) == (1, 0)  # carried, but not cited


def test_rows_the_ledger_held_before_the_upgrade_are_found(tmp_path: Path) -> None:
    older = Schema(
        "project", tuple(m for m in PROJECT.migrations if m.name != "0010_memory_injected")
    )
    path = tmp_path / "ember.db"
    before = Database(path, older)
    before.write(
        lambda c: c.execute(
            "INSERT INTO memory_injections (session_id, message_index, message_digest, block, "
            "memory_ids, created_at) VALUES (?,?,?,?,?,?)",
            (SESSION, 0, "d0", render_block([LOGIN]), f'["{LOGIN.id}"]', 1_790_000_100.0),
        )
    )
    before.close()
    after = Database(path, PROJECT)
    try:
        found = after.read(lambda c: memory_use(c, LOGIN.id))
    finally:
        after.close()
    assert found.requests == 1 and found.last == 1_790_000_100.0


def test_on_postgres_rows_held_before_the_upgrade_are_found(tmp_path: Path, pg_url: str) -> None:
    from ember.store.pg.database import PgDatabase

    older = Schema(
        "project", tuple(m for m in PG_PROJECT.migrations if m.name != "0010_memory_injected")
    )
    path = tmp_path / "p" / "ember.db"

    def owner(schema: Schema) -> PgDatabase:
        return PgDatabase(path, schema, url=pg_url, schema_name="ember_p_upgrade",
                          log_failures=False)  # fmt: skip

    before = owner(older)
    before.write(
        lambda c: c.execute(
            "INSERT INTO memory_injections (session_id, message_index, message_digest, block, "
            "memory_ids, created_at) VALUES (?,?,?,?,?,?)",
            (SESSION, 0, "d0", render_block([LOGIN]), f'["{LOGIN.id}"]', 1_790_000_100.0),
        )
    )
    before.close()
    after = owner(PG_PROJECT)
    try:
        found = after.read(lambda c: memory_use(c, LOGIN.id))
    finally:
        after.close()
    assert found.requests == 1 and found.last == 1_790_000_100.0
