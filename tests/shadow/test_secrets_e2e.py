"""A password said in a session is stored nowhere and injected nowhere, end to end.

Session 1 (the official SDK through the real proxy) states the staging database's URL with
its password; the emulated model of the shadow turn proposes it word for word, password and
all, as a careless model would (it reads the session's own prefix, where the user's words
are whole). Ember keeps the fact with the password masked, and the bytes of the project's
database files — the transcript, the proposals, the memories, the WAL — never hold the
password. Session 2 asks about the database and gets the masked fact injected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ember.embedder import get_embedder
from ember.testing.replies import Reply
from ember.testing.shadow import Line, question_of, shadow_replies
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import ask, db_path, rows, wait_for

PASSWORD = "Xk9-pa55w0rd"
SAID = (
    "Remember the staging DATABASE_URL is "
    f"postgres://shop:{PASSWORD}@staging-db.internal:5432/shop and migrations run from CI."
)
SESSION_1 = "5ec5ec5e-0000-4000-8000-000000000001"
SESSION_2 = "5ec5ec5e-0000-4000-8000-000000000002"


def leaky_model() -> Any:
    """A shadow answer that copies the user's words from the session itself (the prefix,
    where the password is whole), citing the question's line for that message."""
    base = shadow_replies()

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        if question_of(body) is None:
            return None
        said = [
            m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in body.get("messages", [])
            if m.get("role") == "user"
        ]
        raw = next((s for s in said if PASSWORD in s), None)
        if raw is None:
            return base(body, path)

        def choose(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
            line = next(x for x in lines if x.kind == "user" and "staging" in x.text)
            evidence = [{"kind": "user-stated", "messageId": line.id}]
            return [{"content": raw, "category": "infrastructure", "evidence": evidence}]

        return shadow_replies(choose)(body, path)

    return reply


def files_of(db: Path) -> bytes:
    """Every byte the project's database holds on disk (the file, its WAL, its journal)."""
    return b"".join(
        p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name) and p.is_file()
    )


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    get_embedder()
    made = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    made.emulator.reply_fn = leaky_model()
    return made


def test_a_password_said_in_a_session_is_stored_nowhere_and_injected_nowhere(
    stack: Stack,
) -> None:
    db = db_path(stack.home)
    history: list[dict[str, Any]] = []
    ask(stack, SESSION_1, history, "Let me tell you about this repo. " * 40)
    ask(stack, SESSION_1, history, SAID)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"))
    [(content, error)] = rows(db, "SELECT content, validation_error FROM shadow_fact_proposals")
    assert error is None
    assert content.startswith("Remember the staging DATABASE_URL is postgres://shop:[redacted")
    assert "@staging-db.internal:5432/shop" in content  # what the fact is for is kept
    [(memory,)] = rows(db, "SELECT content FROM memories")
    assert memory == content
    [(said,)] = rows(
        db, "SELECT content FROM transcript_messages WHERE kind='user' AND content LIKE '%staging%'"
    )
    assert PASSWORD not in said and "[redacted password in a URL]" in said

    ask(stack, SESSION_2, [], "Where is the staging database?")
    injected = stack.emulator.requests[-1].body
    assert b"staging-db.internal" in injected  # the fact went in ...
    assert PASSWORD.encode() not in injected  # ... without its password
    assert PASSWORD.encode() not in files_of(db)


def test_a_fact_that_is_only_a_token_is_refused_with_its_reason(stack: Stack) -> None:
    token = "ghp_" + "Q7w3E9r1T5y8U2i6O4p0A3s7D1f5G9h2J6k4"
    db = db_path(stack.home)
    history: list[dict[str, Any]] = []
    ask(stack, SESSION_1, history, "Let me tell you about this repo. " * 40)
    stack.emulator.reply_fn = _proposing(f"The deploy token is {token}")
    ask(stack, SESSION_1, history, f"Remember the deploy token is {token}")
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    [(content, error, memory_id)] = rows(
        db, "SELECT content, validation_error, memory_id FROM shadow_fact_proposals"
    )
    assert error == "secret: refused: a memory never holds a GitHub token"
    assert memory_id is None and token not in content
    assert rows(db, "SELECT COUNT(*) FROM memories") == [(0,)]
    assert token.encode() not in files_of(db)


def _proposing(fact: str) -> Any:
    def choose(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
        line = next(x for x in lines if x.kind == "user" and re.search("deploy token", x.text))
        return [{"content": fact, "evidence": [{"kind": "user-stated", "messageId": line.id}]}]

    return shadow_replies(choose)
