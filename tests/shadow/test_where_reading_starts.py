"""Where shadow memory starts reading a session it was not on for (README, Shadow memory): the
history the session brings back is skipped, the turn it comes back with is read — the same
whether traffic learning happened to record part of that history while shadow memory was off
or nothing recorded it at all. A session that starts with shadow memory on is read whole.

Each proxy is a new app over one ``EMBER_HOME``, stopped before the next starts (``ember
wrap``); the client is the official ``anthropic`` SDK against the emulator. What a shadow run
would read is what its cursor leaves unread (``cursors.ensure_cursor``, as the runner asks).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.server import BackgroundServer
from ember.shadow import cursors
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT, for_postgres
from ember.store.transcript_rows import unread
from ember.testing import Emulator
from tests.traffic.conversation import db_path, run_session, send
from tests.traffic.test_replay_e2e import Proxy

SESSION = "aaaaaaaa-0001"
#: No shadow run spends anything here: what is read is the cursor's, not a run's.
QUIET = {"shadow_max_share": 0.0, "shadow_allowance_tokens": 0}


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The settings of a store: the project's file, or a PostgreSQL schema (``store_url``)."""
    return {} if request.param == "sqlite" else {"store_url": request.getfixturevalue("pg_url")}


def to_read(home: Path, store: dict[str, Any], session: str = SESSION) -> list[str]:
    """The messages of the session's latest generation its shadow reads (from its baseline)."""
    path = db_path(home)
    if "store_url" in store:  # imported only then: the postgres extra may not be installed
        from ember.store.pg.database import PgDatabase
        from ember.store.pg.names import schema_name

        db: Database = PgDatabase(
            path, for_postgres(PROJECT), url=store["store_url"], schema_name=schema_name(home, path)
        )
    else:
        db = Database(path, PROJECT)
    sql = "SELECT MAX(generation) FROM transcript_messages WHERE session_id=?"

    def job(c: Connection) -> list[str]:
        cursor = cursors.ensure_cursor(c, session, int(c.execute(sql, (session,)).fetchone()[0]))
        return [m.content for m in unread(c, session, cursor.generation, cursor.baseline)]

    try:
        return db.write(job)
    finally:
        db.close()


def chat(history: list[dict[str, Any]], answer: str, ask: str = "") -> list[dict[str, Any]]:
    more = [{"role": "assistant", "content": answer}]
    return [*history, *more, *([{"role": "user", "content": ask}] if ask else [])]


@pytest.mark.parametrize("traffic_learning", [True, False], ids=["recorded", "not-recorded"])
def test_a_session_shadow_memory_was_off_for_is_read_from_the_turn_it_comes_back_with(
    tmp_path: Path, upstream: str, traffic_learning: bool, store: dict[str, Any]
) -> None:
    """Traffic learning records only the requests worth a look (tool results, instructions):
    it recorded the tool rounds but not the chat after them — where reading starts used to
    depend on that."""
    home = tmp_path / "home"
    with Proxy(home, upstream, traffic_learning=traffic_learning, **store) as url:
        history = run_session(url, SESSION)  # shadow memory off
        history = chat(history, "The tests pass.", "Great. Anything else to fix?")
        send(url, SESSION, history)
    history = chat(history, "No, that was all.", "Thanks. Summarise what you changed.")
    with Proxy(home, upstream, shadow="primary", **QUIET, **store) as url:
        send(url, SESSION, history)
    read = to_read(home, store)
    assert read[0] == "Thanks. Summarise what you changed."
    assert len(read) == 2  # and the answer to it
    assert not any("pytest" in text or "fix" in text for text in read)

    # A later restart, shadow memory still on, does not move where it started.
    with Proxy(home, upstream, shadow="primary", **QUIET, **store) as url:
        send(url, SESSION, chat(history, "Done.", "And the docs?"))
    assert to_read(home, store)[:2] == read


def test_a_session_that_starts_with_shadow_memory_on_is_read_from_its_first_message(
    tmp_path: Path, upstream: str, store: dict[str, Any]
) -> None:
    home = tmp_path / "home"
    with Proxy(home, upstream, shadow="primary", **QUIET, **store) as url:
        run_session(url, SESSION)
    read = to_read(home, store)
    assert read[0] == "Run the test suite please."
    assert "12 passed in 0.4s" in read
