"""Shadow memory for Codex over WebSocket: the recorded Codex requests, sent the way Codex
0.171.0 sends them on a socket (a ``generate: false`` prewarm holding its base prompt, then the
turn continuing it by ``previous_response_id`` with the other items), through the real proxy
with the official OpenAI SDK's ``responses.connect()``.

The turn alone does not stand as a request (its prompt lives in the prewarm), so the exchange
flow rebuilds it whole; the shadow forks that over HTTP, and the provider reads the socket's
prefix from its cache.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from ember.embedder import get_embedder
from ember.project import resolve_project
from ember.testing.shadow import shadow_replies
from tests.client_fixtures import FIXTURES
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import rows, wait_for

RECORDED = FIXTURES / "codex" / "exec-then-resume" / "000-main.body"
CWD = "/work/proj"  # the recorded <environment_context>'s cwd
STATED = "Deploys go to fly.io."
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")


def answer(conn: Any) -> Any:
    for event in conn:
        if event.type in TERMINAL:
            return event
    raise AssertionError("the connection ended before the response did")


def codex_turn(prompt: str) -> dict[str, Any]:
    """The recorded first ``codex exec`` request, its prompt replaced."""
    body = json.loads(RECORDED.read_bytes())
    last = body["input"][-1]
    assert last["role"] == "user"
    last["content"][0]["text"] = prompt
    return dict(body)


def over_socket(conn: Any, body: dict[str, Any], previous: str | None = None) -> Any:
    """What Codex sends on a new socket: the prewarm with its base prompt, then the rest."""
    fields = {k: v for k, v in body.items() if k not in ("input", "stream")}
    items = body["input"]
    if previous is None:
        conn.send({"type": "response.create", **fields, "input": items[:1], "generate": False})
        previous = answer(conn).response.id
        items = items[1:]
    conn.send(
        {"type": "response.create", **fields, "input": items, "previous_response_id": previous}
    )
    return answer(conn)


@pytest.fixture
def shadowed(make_stack: StackFactory) -> Stack:
    get_embedder()
    stack = make_stack(stages="features", shadow="primary")
    stack.emulator.reply_fn = shadow_replies()
    return stack


def db_of(stack: Stack) -> Path:
    ref = resolve_project({}, None, f"<environment_context><cwd>{CWD}</cwd>")
    assert ref is not None
    return ref.db_path(stack.home)


def test_a_codex_socket_session_is_forked_hot_and_its_stated_fact_kept(shadowed: Stack) -> None:
    stack = shadowed
    body = codex_turn(f"{STATED} Please read notes.txt and tell me what it says.")
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)
    with client, client.responses.connect() as conn:
        done = over_socket(conn, body)
        assert done.type == "response.completed"
    db = db_of(stack)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    [(path, read, fresh, written)] = rows(
        db,
        "SELECT path, cache_read_tokens, input_tokens, cache_write_tokens "
        "FROM shadow_memory_runs WHERE status='completed'",
    )
    assert path == "hot"
    assert read / (read + fresh + written) > 0.9  # the socket's prefix, read from the cache
    [fork] = [r for r in stack.emulator.requests if b"[ember shadow turn]" in r.body]
    assert (fork.method, fork.path) == ("POST", "/v1/responses")  # a fork is an HTTP call
    sent = fork.json()
    assert "previous_response_id" not in sent and "generate" not in sent and "type" not in sent
    # The whole conversation as the provider got it over the socket (ember's own edits in
    # it), then the answer and the ask.
    prewarm, turn = [r.json() for r in stack.emulator.requests if r.method == "WEBSOCKET"]
    whole = prewarm["input"] + turn["input"]
    assert sent["input"][: len(whole)] == whole
    assert sent["input"][len(whole)]["role"] == "assistant"  # the answer, replayed
    assert {k: sent[k] for k in ("model", "tools", "prompt_cache_key")} == {
        k: body[k] for k in ("model", "tools", "prompt_cache_key")
    }
    assert fork.header("upgrade") is None and "websockets" not in (fork.header("openai-beta") or "")
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"))
    kept = rows(db, "SELECT content FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")
    assert [c for (c,) in kept if "fly.io" in c]


def test_a_resumed_codex_session_on_a_new_socket_continues_and_reads_only_what_is_new(
    shadowed: Stack,
) -> None:
    """``codex exec resume --last`` opens a new socket and sends the old conversation again:
    it continues the same generation, and the next run reads only the new messages."""
    stack = shadowed
    first = codex_turn(f"{STATED} Please read notes.txt.")
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)
    with client, client.responses.connect() as conn:
        done = over_socket(conn, first)
    db = db_of(stack)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    resumed = copy.deepcopy(first)
    said = [o for o in done.response.output if o.type == "message"]
    resumed["input"] += [o.model_dump(exclude_none=True) for o in said]
    resumed["input"].append(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Tests run with pytest -x."}],
        }
    )
    with client, client.responses.connect() as conn:
        assert over_socket(conn, resumed).type == "response.completed"
    wait_for(
        lambda: len(rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'")) == 2
    )
    assert rows(db, "SELECT DISTINCT generation FROM transcript_messages") == [(1,)]
    runs = rows(
        db, "SELECT path, from_seq, through_seq FROM shadow_memory_runs ORDER BY started_at"
    )
    assert [r[0] for r in runs] == ["hot", "hot"]
    assert runs[1][1] > runs[0][2]  # the second read starts after what the first one read
    wait_for(
        lambda: (
            len(rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")) >= 2
        )
    )
    kept = [c for (c,) in rows(db, "SELECT content FROM shadow_fact_proposals")]
    assert sum("fly.io" in c for c in kept) == 1 and any("pytest -x" in c for c in kept)
