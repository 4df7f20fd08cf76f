"""No echo, with the requests Claude Code 2.1.197 sent (``print-then-continue``): a fact the
shadow learned from a session is never injected back into that session, nor into another
session that carries the same messages (a forked conversation under a new id), and is injected
into a session that does not hold it."""

from __future__ import annotations

import urllib.request

import pytest

from ember.embedder import get_embedder
from ember.testing.shadow import shadow_replies
from tests.client_fixtures import ClientRequest, load_scenario
from tests.conftest import Stack, StackFactory
from tests.proxy.test_real_clients import project_db
from tests.shadow.test_e2e import rows, wait_for

MEMORY_TAG = b"<ember-memory>"
SESSION = "00000001-0000-4000-8000-000000000001"  # the recorded (scrubbed) session id
FORKED = "00000001-0000-4000-8000-0000000000f0"
ELSEWHERE = "00000001-0000-4000-8000-0000000000e0"
PROMPT = b"Please read notes.txt and tell me what it says."
STATED = b"Deploys go to fly.io. " + PROMPT
NEXT_ASK = b"Thanks. In one word: is it a todo list?"
ASK = b"Where do deploys go?"


def recorded(index: int) -> ClientRequest:
    [req] = [r for r in load_scenario("claude-code", "print-then-continue") if r.index == index]
    return req


def send(stack: Stack, req: ClientRequest, body: bytes, session: str = SESSION) -> bytes:
    """Send the recorded request with ``body`` (and its session id replaced): the body the
    provider received."""
    headers = {
        k: v.replace(SESSION, session)
        for k, v in req.headers.items()
        if k not in ("host", "content-length", "connection")
    }
    body = body.replace(SESSION.encode(), session.encode())
    url = stack.url + req.path + (f"?{req.query}" if req.query else "")
    seen = len(stack.emulator.requests)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()
    return stack.emulator.requests[seen].body


@pytest.fixture
def learned(make_stack: StackFactory) -> Stack:
    """The recorded first turn, in which the user states where deploys go, read by the shadow
    into a memory of the project."""
    get_embedder()
    stack = make_stack(stages="features", shadow="primary")
    stack.emulator.reply_fn = shadow_replies()
    first = recorded(1)
    assert PROMPT in first.body
    send(stack, first, first.body.replace(PROMPT, STATED))
    db = project_db(stack.home)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"))
    [(content,)] = rows(db, "SELECT content FROM shadow_fact_proposals")
    assert "fly.io" in content
    return stack


def continued(ask: bytes) -> bytes:
    """The recorded ``--continue`` request: the history with the stated fact, then ``ask``."""
    body = recorded(4).body
    assert NEXT_ASK in body
    return body.replace(PROMPT, STATED).replace(NEXT_ASK, ask)


def test_a_fact_is_not_injected_back_into_the_session_it_came_from(learned: Stack) -> None:
    sent = send(learned, recorded(4), continued(ASK))
    assert MEMORY_TAG not in sent


def test_nor_into_another_session_that_holds_the_same_messages(learned: Stack) -> None:
    sent = send(learned, recorded(4), continued(ASK), session=FORKED)
    assert MEMORY_TAG not in sent


def test_but_it_is_injected_into_a_session_that_does_not_hold_it(learned: Stack) -> None:
    first = recorded(1)
    sent = send(learned, first, first.body.replace(PROMPT, ASK), session=ELSEWHERE)
    assert MEMORY_TAG in sent and b"fly.io" in sent.split(MEMORY_TAG, 1)[1]
