"""Responses over WebSocket through the real proxy to the emulator, on loopback: the official
SDK's ``responses.connect`` (and a plain WebSocket client where the SDK would hide the wire)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.store.accounting import exchanges
from ember.testing import Reply
from tests.client_fixtures import FIXTURES
from tests.conftest import Stack, StackFactory

GPT = "gpt-5.1"
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")
SHAPING_TAG = "<ember_output_shaping>"
ACME = "/home/dev/acme-api"


@contextmanager
def bounded(conn: Any, seconds: float = 10.0) -> Iterator[Any]:
    """Close the connection if the test is still on it after ``seconds``: a hang fails."""
    timer = threading.Timer(seconds, conn.close)
    timer.start()
    try:
        yield conn
    finally:
        timer.cancel()


def answer(conn: Any) -> list[Any]:
    events = []
    for event in conn:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError("the connection ended before the response did")


def create(prompt: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "response.create", "model": GPT, "input": prompt, **fields}


def sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)


@contextmanager
def raw(stack: Stack, **headers: str) -> Iterator[ClientConnection]:
    url = "ws" + stack.url[len("http") :] + "/v1/responses"
    with connect(url, additional_headers=headers, open_timeout=5, close_timeout=2) as ws:
        yield ws


def refused_status(stack: Stack, **headers: str) -> tuple[int, dict[str, Any], float]:
    started = time.perf_counter()
    with pytest.raises(InvalidStatus) as refused, raw(stack, **headers):
        pass
    response = refused.value.response
    return response.status_code, json.loads(response.body), time.perf_counter() - started


def rows(stack: Stack, db: Path | None = None) -> list[dict[str, Any]]:
    stack.settle()
    return exchanges(db or stack.home / "stats.db")


def rows_after_close(stack: Stack, n: int) -> list[dict[str, Any]]:
    """The rows once ``n`` are there: a socket the client closed is wound up by the proxy a
    moment later, and only then are its unfinished responses accounted."""
    assert eventually(lambda: len(rows(stack)) >= n), rows(stack)
    return rows(stack)


def sent(stack: Stack) -> list[dict[str, Any]]:
    """The ``response.create`` messages as the emulator received them."""
    return [r.json() for r in stack.emulator.requests if r.method == "WEBSOCKET"]


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- the happy path -------------------------------------------------------------------------


def test_two_creates_on_one_socket_stream_in_order_through_the_stages_with_a_row_each(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features")
    stack.emulator.script(Reply("First, scripted."))
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn):
        conn.send(create("hello", instructions="Be helpful.", prompt_cache_key="sess-ws"))
        first = answer(conn)
        conn.send(create("again", instructions="Be helpful.", prompt_cache_key="sess-ws"))
        second = answer(conn)
    for events in (first, second):
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert (events[0].type, events[-1].type) == ("response.created", "response.completed")
    assert first[-1].response.output_text == "First, scripted."
    assert second[-1].response.output_text.startswith("Noted: again.")
    # One upstream socket for the client's socket, carrying both requests, each shaped.
    assert [r.method for r in stack.emulator.requests] == ["GET", "WEBSOCKET", "WEBSOCKET"]
    bodies = sent(stack)
    assert all(b["instructions"].startswith("Be helpful.\n\n" + SHAPING_TAG) for b in bodies)
    assert bodies[0]["instructions"] == bodies[1]["instructions"]  # byte-stable per session
    assert [b["type"] for b in bodies] == ["response.create"] * 2
    recorded = rows(stack)
    assert len(recorded) == 2
    for row, events in zip(recorded, (first, second), strict=True):
        usage = events[-1].response.usage
        assert (row["protocol"], row["stream"], row["outcome"]) == ("openai_responses", 1, "ok")
        assert (row["status"], row["session_id"], row["model"]) == (200, "sess-ws", GPT)
        assert row["output_tokens"] == usage.output_tokens
        assert row["input_tokens"] + row["cache_read_tokens"] == usage.input_tokens


def test_an_unedited_message_reaches_the_provider_byte_for_byte(make_stack: StackFactory) -> None:
    stack = make_stack()  # accounting only: nothing edits the request
    message = '{ "type":"response.create",  "model":"gpt-5.1","input":"caf\\u00e9", "x":1.50 }'
    with raw(stack) as ws:
        ws.send(message)
        while json.loads(ws.recv(timeout=5))["type"] != "response.completed":
            pass
    assert stack.emulator.requests[-1].body == message.encode()


def test_handshake_headers_reach_the_provider_and_ember_headers_do_not(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    headers = {
        "authorization": "Bearer sk-client",
        "openai-beta": "responses_websockets=2026-02-06",
        "session-id": "sess-h",
        "x-ember-project-id": "acme",
    }
    with raw(stack, **headers) as ws:
        ws.send(json.dumps(create("hi")))
        ws.recv(timeout=5)
    handshake = stack.emulator.requests[0]
    assert handshake.method == "GET"
    for name in ("authorization", "openai-beta", "session-id"):
        assert handshake.header(name) == headers[name]
    assert handshake.header("x-ember-project-id") is None


def test_memory_is_injected_into_a_websocket_ask_as_into_an_http_one(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features")
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    with HierarchicalMemory(ref.db_path(stack.home), get_embedder()) as mem:
        mem.add("The login handler must reject an empty password with a 400.", importance=0.8)
    ask = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What must login do with an empty password?"}
            ],
        }
    ]
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn, 30):
        conn.send(create(ask, instructions=f"Working directory: {ACME}"))
        assert answer(conn)[-1].type == "response.completed"
    [body] = sent(stack)
    parts = body["input"][0]["content"]
    assert parts[0] == ask[0]["content"][0]  # the client's part, untouched
    assert parts[1]["text"].startswith("<ember-memory>") and "empty password" in parts[1]["text"]
    assert len(rows(stack, ref.db_path(stack.home))) == 1


def test_a_continuation_without_a_working_directory_stays_in_the_project(
    make_stack: StackFactory,
) -> None:
    """Codex names ``previous_response_id`` and sends only new items after its first request:
    without the project found earlier on the socket, its rows would land in the global file."""
    stack = make_stack()
    env = [
        {"role": "user", "content": f"<environment_context><cwd>{ACME}</cwd></environment_context>"}
    ]
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn):
        conn.send(create(env, generate=False))
        prepared = answer(conn)[-1].response.id
        conn.send(create("now go", previous_response_id=prepared))
        assert answer(conn)[-1].type == "response.completed"
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    recorded = rows(stack, ref.db_path(stack.home))
    assert [r["output_tokens"] for r in recorded] == [0, recorded[1]["output_tokens"]]
    assert recorded[1]["output_tokens"] > 0
    assert not (stack.home / "stats.db").exists() or rows(stack) == []


def test_a_codex_continuation_stays_in_the_main_thread_with_one_shaping_block(
    make_stack: StackFactory,
) -> None:
    """What Codex 0.171.0 sends on a socket (seen with the real CLI through this proxy): a
    prewarm (``generate: false``) holding its base developer prompt, then the turn continuing
    it with new items only, opening with another developer item. Read alone the turn looks like
    another agent of the session (which shaping and memory leave alone), and a block in its
    developer item would be a second copy in the model's prompt."""
    stack = make_stack(stages="features")
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]

    def item(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "input_text", "text": text}]}

    base = {"tools": tools, "prompt_cache_key": "codex-thread", "store": False, "stream": True}
    turn = [
        item("developer", "<permissions instructions>read-only</permissions instructions>"),
        item("user", f"<environment_context><cwd>{ACME}</cwd></environment_context>"),
        item("user", "read notes.txt"),
    ]
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn):
        conn.send(create([item("developer", "You are Codex.")], generate=False, **base))
        prepared = answer(conn)[-1].response.id
        conn.send(create(turn, previous_response_id=prepared, **base))
        assert answer(conn)[-1].type == "response.completed"
    prewarm, continued = sent(stack)
    assert prewarm["input"][0]["content"][-1]["text"].startswith(SHAPING_TAG)
    assert continued["input"] == turn and "instructions" not in continued  # carried, not repeated
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    recorded = rows(stack, ref.db_path(stack.home))
    assert [(r["thread"], r["thread_kind"]) for r in recorded] == [("codex-thread", "main")] * 2
    assert [r["output_tokens"] > 0 for r in recorded] == [False, True]


def test_codex_default_model_turn_gets_the_block_its_empty_prewarm_could_not_carry(
    make_stack: StackFactory,
) -> None:
    """Codex 0.171.0 with its default model prewarms the socket with an empty input, then sends
    its tools (an ``additional_tools`` item) and whole prompt with the turn. The prewarm's block
    can only go in its ``instructions``, which a continuation does not inherit: the turn gets
    the block in its own last developer message, once, and resolves to its project."""
    stack = make_stack(stages="features")

    def item(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    tools = {"type": "additional_tools", "role": "developer", "tools": []}
    base = {"prompt_cache_key": "codex-default", "store": False, "stream": True}
    turn = [
        tools,
        item("developer", "You are Codex."),
        item("developer", "<skills_instructions>none</skills_instructions>"),
        item("user", f"<environment_context><cwd>{ACME}</cwd></environment_context>"),
        item("user", "read notes.txt"),
    ]
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn):
        conn.send(create([], generate=False, **base))
        prepared = answer(conn)[-1].response.id
        conn.send(create(turn, previous_response_id=prepared, **base))
        first = answer(conn)[-1].response.id
        conn.send(create([item("user", "and then?")], previous_response_id=first, **base))
        assert answer(conn)[-1].type == "response.completed"
    _, continued, second = sent(stack)
    parts = continued["input"][2]["content"]
    assert parts[0] == turn[2]["content"][0] and parts[-1]["text"].startswith(SHAPING_TAG)
    assert json.dumps(continued).count(SHAPING_TAG) == 1 and "instructions" not in continued
    assert SHAPING_TAG not in json.dumps(second)  # inherited from the turn it continues
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    assert [r["thread_kind"] for r in rows(stack, ref.db_path(stack.home))] == ["main"] * 3


def test_an_append_of_the_older_beta_is_answered_and_accounted_but_not_edited(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features")
    append = json.dumps({"type": "response.append", "input": [{"role": "user", "content": "more"}]})
    with raw(stack) as ws:
        for message in (json.dumps(create("hello", instructions="Be helpful.")), append):
            ws.send(message)
            while (event := json.loads(ws.recv(timeout=5)))["type"] != "response.completed":
                pass
    assert event["response"]["output"][0]["content"][0]["text"].startswith("Noted: more.")
    assert stack.emulator.requests[-1].body == append.encode()  # no shaping block added
    recorded = rows(stack)
    assert [(r["model"], r["outcome"]) for r in recorded] == [(GPT, "ok"), (GPT, "ok")]


# -- refusing cleanly -----------------------------------------------------------------------


def test_provider_without_websocket_is_a_426_at_once_and_remembered(
    make_stack: StackFactory,
) -> None:
    """Codex retries any other answer 6 more times over ~7 s before it uses HTTP; a 426 makes it
    fall back at once. Later clients are refused without another handshake to the provider."""
    stack = make_stack()
    stack.emulator.refuse_websocket = 404  # what an HTTP-only server answers
    status, body, _ = refused_status(stack)
    assert status == 426 and "use HTTP" in body["error"]["message"]
    status, _, elapsed = refused_status(stack)
    assert status == 426 and elapsed < 1.0
    assert [r.method for r in stack.emulator.requests] == ["GET"]  # one handshake upstream
    assert rows(stack) == []


def test_codex_recorded_upgrade_is_refused_with_426_when_the_provider_has_no_websocket(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    stack.emulator.refuse_websocket = 404
    recorded = json.loads(
        (FIXTURES / "codex/websockets-on/000-websocket-attempt.json").read_text()
    )["headers"]
    skip = {"host", "connection", "upgrade"}
    headers = {k: v for k, v in recorded.items() if k not in skip and not k.startswith("sec-")}
    status, _, _ = refused_status(stack, **headers)
    assert status == 426
    [handshake] = stack.emulator.requests
    assert handshake.header("x-codex-turn-metadata") == recorded["x-codex-turn-metadata"]
    assert handshake.header("openai-beta") == "responses_websockets=2026-02-06"


def test_openai_websocket_off_refuses_without_asking_the_provider(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(openai_websocket="off")
    status, body, _ = refused_status(stack)
    assert status == 426 and "openai_websocket" in body["error"]["message"]
    assert stack.emulator.requests == []


def test_memory_tool_mode_sends_codex_to_http_where_it_works(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features", memory_mode="tool")
    status, body, _ = refused_status(stack)
    assert status == 426 and "memory_mode" in body["error"]["message"]
    assert stack.emulator.requests == []  # refused before the provider is asked


def test_without_memory_in_tool_mode_the_upgrade_is_relayed(make_stack: StackFactory) -> None:
    # memory_mode = tool with no memory stage composed (a bare proxy): nothing needs HTTP
    stack = make_stack(memory_mode="tool")
    with raw(stack) as ws:
        ws.send(json.dumps(create("hi")))
        assert json.loads(ws.recv(timeout=5))["type"] == "response.created"


def test_a_refused_key_is_passed_on_and_not_remembered(make_stack: StackFactory) -> None:
    stack = make_stack()
    stack.emulator.refuse_websocket = 401
    assert refused_status(stack)[0] == 401
    stack.emulator.refuse_websocket = None
    with raw(stack) as ws:  # the next client, with a good key, gets its socket
        ws.send(json.dumps(create("hi")))
        assert json.loads(ws.recv(timeout=5))["type"] == "response.created"


def test_unreachable_provider_is_a_502_not_a_hang(make_stack: StackFactory) -> None:
    stack = make_stack(upstream="http://127.0.0.1:9")  # discard port: nothing listens
    status, body, elapsed = refused_status(stack)
    assert status == 502 and "cannot reach provider" in body["error"]["message"]
    assert elapsed < 5


# -- failures on an open socket ---------------------------------------------------------------


def test_a_client_that_leaves_mid_response_aborts_the_upstream_one(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    stack.emulator.script(Reply(" ".join(["word"] * 80), delay=0.05))
    with raw(stack) as ws:
        ws.send(json.dumps(create("hi")))
        ws.recv(timeout=5)
        ws.recv(timeout=5)
    assert eventually(lambda: stack.emulator.open_websockets == 0, 2.0)
    [row] = rows_after_close(stack, 1)
    assert row["outcome"] == "cancelled"


def test_a_provider_that_cuts_the_socket_cuts_the_client_and_is_recorded_cut(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    stack.emulator.script(Reply("An answer that will not arrive in full.", cut_after=4))
    received = []
    with raw(stack) as ws, pytest.raises(ConnectionClosed) as closed:
        ws.send(json.dumps(create("hi")))
        while True:
            received.append(json.loads(ws.recv(timeout=5))["type"])
    assert len(received) == 4 and "response.completed" not in received
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    [row] = rows(stack)
    assert row["outcome"] == "cut"


def test_an_error_before_the_response_starts_is_recorded_with_its_status(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    stack.emulator.script(Reply.error(429, "Slow down.", "rate_limit_exceeded"))
    with sdk(stack) as client, client.responses.connect() as conn, bounded(conn):
        conn.send(create("hi"))
        [error] = answer(conn)
    assert (error.type, error.status) == ("error", 429)
    [row] = rows(stack)
    assert (row["status"], row["outcome"]) == (429, "upstream_error")


def test_a_malformed_message_gets_a_400_event_and_the_socket_goes_on(
    make_stack: StackFactory,
) -> None:
    stack = make_stack()
    with raw(stack) as ws:
        ws.send("{not json")
        error = json.loads(ws.recv(timeout=5))
        ws.send(json.dumps(create("hi")))
        while json.loads(ws.recv(timeout=5))["type"] != "response.completed":
            pass
    assert (error["type"], error["status"]) == ("error", 400)
    assert error["error"]["message"].startswith("ember: ")
    assert [r.method for r in stack.emulator.requests] == ["GET", "WEBSOCKET"]
    assert [r["outcome"] for r in rows(stack)] == ["ok"]


def test_a_message_over_max_body_mb_gets_a_413_event_and_goes_no_further(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(max_body_mb=1)
    with raw(stack) as ws:
        ws.send(json.dumps(create("x" * (1 << 20))))
        error = json.loads(ws.recv(timeout=5))
        ws.send(json.dumps(create("a small one")))
        assert json.loads(ws.recv(timeout=5))["type"] == "response.created"
    assert (error["type"], error["status"]) == ("error", 413)
    assert "EMBER_MAX_BODY_MB" in error["error"]["message"]
    assert [r.method for r in stack.emulator.requests] == ["GET", "WEBSOCKET"]
