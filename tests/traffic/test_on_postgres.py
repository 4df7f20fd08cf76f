"""Traffic learning on a PostgreSQL store (``store_url``, issue #24), through real proxies:
a lesson seen once in each of two sessions, each through a proxy of its own, becomes one
memory in the project's schema with evidence naming both sessions' transcript rows; saved
once, it is not saved again after a restart; and it never counts in another project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.config import load_settings
from ember.server import BackgroundServer
from ember.store.pg.database import PgDatabase
from ember.store.pg.names import schema_name
from ember.store.schema import PROJECT, for_postgres
from ember.testing import Emulator
from tests.traffic.conversation import CWD, NOT_FOUND, db_path, run_session, send, serve_sessions
from tests.traffic.test_replay_e2e import Proxy, resumed
from tests.traffic.test_restart_e2e import OTHER_CWD

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

_MEMORIES = (
    "SELECT id, category, content FROM memories "
    "WHERE metadata::jsonb ->> 'source' = 'traffic' ORDER BY seq"
)
_EVIDENCE = (
    "SELECT t.kind, t.content, t.session_id FROM memory_evidence e "
    "JOIN memories m ON m.seq = e.memory_seq JOIN transcript_messages t ON t.id = e.message_id "
    "WHERE m.id = ? AND e.kind = 'tool-verified' ORDER BY t.seq"
)


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


def proxy_run(home: Path, url: str, upstream: str, *sessions: tuple[str, str, str]) -> None:
    """A proxy on the store for these sessions (name, cwd, what the failed call printed),
    stopped after them, as ``ember wrap`` does."""
    settings = load_settings(
        env={"EMBER_HOME": str(home)},
        anthropic_url=upstream,
        openai_url=upstream + "/v1",
        shadow="off",
        store_url=url,
    )
    serve_sessions(settings, sessions)


def query(home: Path, url: str, sql: str, args: tuple[Any, ...] = (), cwd: str = CWD) -> list[Any]:
    """The rows of ``sql`` in the project's schema (none when it has no schema yet)."""
    path = db_path(home, cwd)
    db = PgDatabase(path, for_postgres(PROJECT), url=url, schema_name=schema_name(home, path))
    try:
        if not db.exists():
            return []
        return [tuple(r) for r in db.read(lambda c: c.execute(sql, args).fetchall())]
    finally:
        db.close()


def session(name: str, cwd: str = CWD, failure: str = NOT_FOUND) -> tuple[str, str, str]:
    return name, cwd, failure


def test_a_lesson_seen_in_two_proxies_sessions_becomes_one_memory(
    tmp_path: Path, pg_url: str, upstream: str
) -> None:
    home = tmp_path / "home"
    proxy_run(home, pg_url, upstream, session("aaaaaaaa-0001"))
    assert query(home, pg_url, _MEMORIES) == []  # seen once: not enough
    proxy_run(home, pg_url, upstream, session("bbbbbbbb-0002"))  # a restart in between
    recoveries = [m for m in query(home, pg_url, _MEMORIES) if m[1] == "error_recovery"]
    assert len(recoveries) == 1
    assert "`python -m pytest -q` fails" in recoveries[0][2]
    evidence = query(home, pg_url, _EVIDENCE, (recoveries[0][0],))
    assert [(kind, text) for kind, text, _ in evidence] == [
        ("tool_result", "12 passed in 0.4s")
    ] * 2
    assert {s for _, _, s in evidence} == {"aaaaaaaa-0001", "bbbbbbbb-0002"}
    assert not (home / "projects").exists()  # all of it in the schema

    before = query(home, pg_url, _MEMORIES)
    other = "bash: line 1: python: command not found"
    proxy_run(home, pg_url, upstream, session("cccccccc-0003", failure=other))
    assert query(home, pg_url, _MEMORIES) == before  # saved once, never again
    counts = query(home, pg_url, "SELECT count, saved FROM traffic_sightings ORDER BY key")
    assert counts == [(3, 1), (3, 1)]


def test_sightings_in_one_project_never_count_in_another(
    tmp_path: Path, pg_url: str, upstream: str
) -> None:
    home = tmp_path / "home"
    proxy_run(home, pg_url, upstream, session("aaaaaaaa-0001"))
    proxy_run(home, pg_url, upstream, session("bbbbbbbb-0002", cwd=OTHER_CWD))
    for cwd in (CWD, OTHER_CWD):
        assert query(home, pg_url, _MEMORIES, cwd=cwd) == []
        assert query(home, pg_url, "SELECT count FROM traffic_sightings", cwd=cwd) == [(1,), (1,)]


def test_a_replayed_history_raises_no_count_after_a_restart(
    tmp_path: Path, pg_url: str, upstream: str
) -> None:
    """A session resumed through a new proxy sends its history again: on the store, as in a
    file, the mistake in it stays one sighting and is not saved."""
    home = tmp_path / "home"
    counts = "SELECT key, count, saved FROM traffic_sightings ORDER BY key"
    with Proxy(home, upstream, store_url=pg_url) as url:
        history = run_session(url, "aaaaaaaa-0001")
    before = query(home, pg_url, counts)
    assert [(count, saved) for _, count, saved in before] == [(1, 0), (1, 0)]
    with Proxy(home, upstream, store_url=pg_url) as url:
        send(url, "cccccccc-0003", resumed(history))  # --continue: a new session id
    assert query(home, pg_url, counts) == before
    assert query(home, pg_url, _MEMORIES) == []
