"""The kernel's transcript: each exchange of a user's thread recorded once, whichever feature
asks first, and a project's first-touch jobs run before its first recorded message."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ember.compose import build_storage
from ember.config import load_settings
from ember.exchange import Exchange, Outcome
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC
from ember.protocols.base import AssembledMessage, Block
from ember.protocols.jsonedit import JsonDoc
from ember.sessions import SessionRegistry
from ember.store.driver import Connection
from ember.store.registry import Storage
from ember.threads import Thread
from ember.transcript_recorder import Transcripts

PROJECT = ProjectRef("/home/dev/transcripts", "header:x-ember-cwd")


def exchange(messages: list[dict[str, Any]], settings: Any, session: str = "s1") -> Exchange:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages})
    return Exchange(ANTHROPIC, "/v1/messages", "", {}, JsonDoc(body.encode()), session, PROJECT)


def outcome(text: str) -> Outcome:
    answer = AssembledMessage(
        "anthropic", blocks=[Block("text", text)], stop_reason="end_turn", complete=True
    )
    return Outcome(200, "ok", answer, False, 1.0, sent=b"{}")


def rows(storage: Storage, home: Path) -> list[tuple[Any, ...]]:
    db = storage.database(PROJECT.db_path(home))
    db.flush(10)
    return db.read(
        lambda c: [
            tuple(r)
            for r in c.execute(
                "SELECT generation, position, role, content FROM transcript_messages ORDER BY seq"
            )
        ]
    )


def recorder(tmp_path: Path) -> tuple[Transcripts, Storage]:
    settings = load_settings(env={}, home=tmp_path)
    storage = build_storage(settings)
    return Transcripts(storage, tmp_path, SessionRegistry()), storage


async def test_two_features_asking_for_one_exchange_record_it_once(tmp_path: Path) -> None:
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    ex = exchange([{"role": "user", "content": "what port does the api use?"}], settings)
    assert transcripts.begin_exchange(ex) == transcripts.begin_exchange(ex) == 1
    done = outcome("8443, set in deploy.yaml")
    first, second = await asyncio.gather(
        transcripts.of_exchange(ex, done), transcripts.of_exchange(ex, done)
    )
    assert first == second and first is not None and first.generation == 1
    assert [r[1:3] for r in rows(storage, tmp_path)] == [(0, "user"), (1, "assistant")]
    storage.close()


async def test_a_thread_that_is_not_the_users_own_is_not_recorded(tmp_path: Path) -> None:
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    side = exchange([{"role": "user", "content": "title this chat"}], settings)
    side.thread = Thread("s1/side/x", "side")
    assert transcripts.begin_exchange(side) == 0
    assert await transcripts.of_exchange(side, outcome("Ports")) is None
    nowhere = exchange([{"role": "user", "content": "hi"}], settings)
    nowhere.project = None
    assert await transcripts.of_exchange(nowhere, outcome("hello")) is None
    assert rows(storage, tmp_path) == []
    storage.close()


async def test_first_touch_jobs_run_once_before_the_first_message(tmp_path: Path) -> None:
    """Shadow memory's activation watermark depends on it: history recorded before the job
    ran would be read as if shadow memory had seen it live."""
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    seen: list[int] = []

    def count_rows(conn: Connection) -> None:
        seen.append(conn.execute("SELECT COUNT(*) FROM transcript_messages").fetchone()[0])

    transcripts.before_first_record(count_rows)
    history: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    for turn in ("one", "two"):
        ex = exchange(history, settings)
        transcripts.begin_exchange(ex)
        await transcripts.of_exchange(ex, outcome(f"ok {turn}"))
        history += [
            {"role": "assistant", "content": f"ok {turn}"},
            {"role": "user", "content": "two"},
        ]
    assert seen == [0]
    assert len(rows(storage, tmp_path)) == 4  # one, ok one, two, ok two
    storage.close()


async def test_an_edited_history_starts_a_new_generation_and_says_which_ended(
    tmp_path: Path,
) -> None:
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    ex1 = exchange([{"role": "user", "content": "deploy to staging"}], settings)
    transcripts.begin_exchange(ex1)
    first = await transcripts.of_exchange(ex1, outcome("done"))
    ex2 = exchange([{"role": "user", "content": "a different start (after /clear)"}], settings)
    transcripts.begin_exchange(ex2)
    second = await transcripts.of_exchange(ex2, outcome("ok"))
    assert first is not None and first.ended is None
    assert second is not None and (second.generation, second.ended) == (2, 1)
    storage.close()


async def test_a_resent_request_that_adds_nothing_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client retrying the very same request (or a benchmark resending one body) must not
    cost a database write per request: nothing new is in it."""
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    db = storage.database(PROJECT.db_path(tmp_path))
    writes: list[str] = []
    awrite = db.awrite

    def counted(fn: Any, **kw: Any) -> Any:
        writes.append(kw.get("label", ""))
        return awrite(fn, **kw)

    monkeypatch.setattr(db, "awrite", counted)
    history = [{"role": "user", "content": "deploy to staging"}]
    for _ in range(3):
        ex = exchange(history, settings)
        transcripts.begin_exchange(ex)
        recorded = await transcripts.of_exchange(ex, outcome("done"))
        assert recorded is not None and recorded.generation == 1
    assert writes == ["transcript"]  # the first time only
    assert len(rows(storage, tmp_path)) == 2
    storage.close()


@pytest.mark.parametrize(
    "second",
    [
        # aider: its rules follow each ask and move to after the next one
        [
            {"role": "user", "content": "Where do we deploy?"},
            {"role": "assistant", "content": "To fly.io."},
            {"role": "user", "content": "Tests run with pytest -x."},
            {"role": "system", "content": "# *SEARCH/REPLACE block* Rules:"},
        ],
        # Claude Code on its default model: the note stays where it was
        [
            {"role": "user", "content": "Where do we deploy?"},
            {"role": "system", "content": "# *SEARCH/REPLACE block* Rules:"},
            {"role": "assistant", "content": "To fly.io."},
            {"role": "user", "content": "Tests run with pytest -x."},
        ],
    ],
    ids=["moved-note", "kept-note"],
)
async def test_a_system_note_after_the_ask_loses_no_message_and_doubles_none(
    tmp_path: Path, second: list[dict[str, Any]]
) -> None:
    """The next ask is recorded whether the client moves its note or keeps it (aider moved
    it, and its second ask never reached shadow memory), and the answer it resends is not
    recorded twice."""
    transcripts, storage = recorder(tmp_path)
    settings = load_settings(env={}, home=tmp_path)
    first = [
        {"role": "user", "content": "Where do we deploy?"},
        {"role": "system", "content": "# *SEARCH/REPLACE block* Rules:"},
    ]
    for messages, answer in ((first, "To fly.io."), (second, "Noted.")):
        ex = exchange(messages, settings)
        transcripts.begin_exchange(ex)
        recorded = await transcripts.of_exchange(ex, outcome(answer))
        assert recorded is not None and recorded.generation == 1
    said = [(r[0], r[2], r[3]) for r in rows(storage, tmp_path)]
    assert said == [
        (1, "user", "Where do we deploy?"),
        (1, "assistant", "To fly.io."),
        (1, "user", "Tests run with pytest -x."),
        (1, "assistant", "Noted."),
    ]
    storage.close()
