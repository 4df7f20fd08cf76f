"""Answers are handled after the client has them, concurrently: a late older one must not
look like a restarted history (the demo saw its transcript recorded twice, under new ids)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ember.compose import build_storage
from ember.config import load_settings
from ember.exchange import Exchange, Outcome, Services
from ember.metrics import new_registry
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC
from ember.protocols.base import AssembledMessage, Block
from ember.protocols.jsonedit import JsonDoc
from ember.proxy.upstream import Upstream
from ember.sessions import SessionRegistry
from ember.shadow.stage import ShadowStage
from ember.store.transcript_rows import latest_generation
from ember.transcript_recorder import Transcripts

PROJECT = ProjectRef("/home/dev/order", "header:x-ember-cwd")


def exchange(messages: list[dict[str, Any]], settings: Any, session: str = "s1") -> Exchange:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages})
    return Exchange(ANTHROPIC, "/v1/messages", "", {}, JsonDoc(body.encode()), session, PROJECT)


def services(settings: Any, storage: Any, upstream: Upstream) -> Services:
    sessions = SessionRegistry()
    transcripts = Transcripts(storage, settings.home, sessions)
    registry = new_registry()
    return Services(settings, storage, sessions, upstream, lambda a, p, q: p, transcripts, registry)


def outcome(text: str) -> Outcome:
    answer = AssembledMessage(
        "anthropic", blocks=[Block("text", text)], stop_reason="end_turn", complete=True
    )
    return Outcome(200, "ok", answer, False, 1.0, sent=b"{}")


async def test_a_late_answer_of_an_older_request_is_not_a_new_generation(tmp_path: Path) -> None:
    settings = load_settings(env={}, home=tmp_path, shadow="primary")
    storage = build_storage(settings)
    stage = ShadowStage(settings)
    upstream = Upstream.from_settings(settings)
    await stage.start(services(settings, storage, upstream))
    first = [{"role": "user", "content": "one"}]
    second = [
        *first,
        {"role": "assistant", "content": "ok one"},
        {"role": "user", "content": "two"},
    ]
    ex1, ex2 = exchange(first, settings), exchange(second, settings)
    await stage.on_request(ex1)
    await stage.on_request(ex2)
    await stage.on_response(ex2, outcome("ok two"))  # the newer answer is handled first
    await stage.on_response(ex1, outcome("ok one"))
    db = storage.database(PROJECT.db_path(tmp_path))
    gens = db.read(
        lambda c: [r[0] for r in c.execute("SELECT DISTINCT generation FROM transcript_messages")]
    )
    count = db.read(lambda c: c.execute("SELECT COUNT(*) FROM transcript_messages").fetchone()[0])
    assert gens == [1] and count == 4
    assert stage.service is not None
    st = stage.service.state("s1")
    assert st is not None and "generation-ended" not in st.pending.values()
    await stage.service.tasks.cancel_all()
    await upstream.close()
    storage.close()


async def test_an_answer_handled_after_the_threads_next_request_queues_no_run(
    tmp_path: Path,
) -> None:
    """The client had the answer and asked again before ember handled it: the new request
    already cancelled the session's shadow work, so this older turn's end must not queue a
    run that would then fork the session in the middle of its next turn."""
    settings = load_settings(env={}, home=tmp_path, shadow="primary")
    storage = build_storage(settings)
    stage = ShadowStage(settings)
    upstream = Upstream.from_settings(settings)
    await stage.start(services(settings, storage, upstream))
    first = [{"role": "user", "content": "one"}]
    second = [
        *first,
        {"role": "assistant", "content": "ok one"},
        {"role": "user", "content": "two"},
    ]
    ex1, ex2 = exchange(first, settings), exchange(second, settings)
    await stage.on_request(ex1)
    await stage.on_request(ex2)  # the next ask is in flight
    await stage.on_response(ex1, outcome("ok one"))  # the first turn's end, handled late
    assert stage.service is not None
    st = stage.service.state("s1")
    assert st is not None and st.pending == {}
    await stage.on_response(ex2, outcome("ok two"))  # the turn that really ended
    assert list(st.pending.values()) == ["turn-ended"]
    db = storage.database(PROJECT.db_path(tmp_path))
    count = db.read(lambda c: c.execute("SELECT COUNT(*) FROM transcript_messages").fetchone()[0])
    assert count == 4  # the late answer is still recorded
    await stage.service.tasks.cancel_all()
    await upstream.close()
    storage.close()


async def test_two_answers_handled_at_once_record_the_thread_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first two answers handled concurrently (a fast agent: the second request
    went out and came back while the first answer's handling waited on the database): the
    thread must be recorded once, in one generation — never again under new ids, with a
    'generation-ended' run reading the copy cold."""
    settings = load_settings(env={}, home=tmp_path, shadow="primary")
    storage = build_storage(settings)
    stage = ShadowStage(settings)
    upstream = Upstream.from_settings(settings)
    await stage.start(services(settings, storage, upstream))
    # The project is touched once already (another session), as on a running proxy.
    other = exchange([{"role": "user", "content": "hello"}], settings, session="s0")
    await stage.on_request(other)
    await stage.on_response(other, outcome("hi"))
    calls: list[int] = []

    def slow_second_lookup(conn: Any, session_id: str) -> int:
        calls.append(1)
        if len(calls) == 2:
            time.sleep(0.3)  # the other answer's rows are written meanwhile
        return latest_generation(conn, session_id)

    monkeypatch.setattr("ember.transcript_recorder.latest_generation", slow_second_lookup)
    first = [{"role": "user", "content": "one"}]
    second = [
        *first,
        {"role": "assistant", "content": "ok one"},
        {"role": "user", "content": "two"},
    ]
    ex1, ex2 = exchange(first, settings), exchange(second, settings)
    await stage.on_request(ex1)
    await stage.on_request(ex2)
    await asyncio.gather(
        stage.on_response(ex1, outcome("ok one")), stage.on_response(ex2, outcome("ok two"))
    )
    db = storage.database(PROJECT.db_path(tmp_path))
    gens = db.read(
        lambda c: [
            r[0]
            for r in c.execute(
                "SELECT DISTINCT generation FROM transcript_messages WHERE session_id='s1'"
            )
        ]
    )
    count = db.read(
        lambda c: c.execute(
            "SELECT COUNT(*) FROM transcript_messages WHERE session_id='s1'"
        ).fetchone()[0]
    )
    assert gens == [1] and count == 4
    assert stage.service is not None
    st = stage.service.state("s1")
    assert st is not None and "generation-ended" not in st.pending.values()
    await stage.service.tasks.cancel_all()
    await upstream.close()
    storage.close()
