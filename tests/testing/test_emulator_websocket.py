"""The emulator speaks Responses over WebSocket: the official SDK's ``responses.connect``
against it gets the same replies, cache model and events as ``POST /v1/responses``, and the
switch that refuses the upgrade refuses it with the status it is given."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import openai
import pytest
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from ember.testing import Emulator, Reply, count_tokens

GPT = "gpt-5.1"
TERMINAL = ("response.completed", "response.failed", "response.incomplete", "error")
LONG = " ".join(f"word{i}" for i in range(1500))  # well past OpenAI's 1024-token cache minimum


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
    """Events of one response, up to its terminal event."""
    events = []
    for event in conn:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError("the connection ended before the response did")


def create(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"type": "response.create", "model": GPT, "input": prompt, **fields}


@contextmanager
def raw(url: str, **headers: str) -> Iterator[ClientConnection]:
    ws_url = "ws" + url[len("http") :] + "/v1/responses"
    with connect(ws_url, additional_headers=headers, open_timeout=5, close_timeout=2) as ws:
        yield ws


def test_sdk_gets_two_complete_answers_on_one_socket(
    gpt: openai.OpenAI, emulator: Emulator
) -> None:
    emulator.script(Reply("First answer, scripted."))
    with gpt.responses.connect() as conn, bounded(conn):
        conn.send(create("hello"))
        first = answer(conn)
        conn.send(create("and again"))
        second = answer(conn)
    for events in (first, second):
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        done = events[-1].response
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert done.output_text == deltas and done.id == events[0].response.id
    assert first[-1].response.output_text == "First answer, scripted."
    assert second[-1].response.output_text.startswith("Noted: and again.")
    assert first[-1].response.id != second[-1].response.id
    methods = [(r.method, r.path) for r in emulator.requests]
    assert methods == [("GET", "/v1/responses")] + [("WEBSOCKET", "/v1/responses")] * 2
    assert emulator.requests[1].json() == create("hello")  # the message, byte for byte


def test_websocket_answer_is_the_http_stream_answer(
    url: str, gpt: openai.OpenAI, emulator: Emulator
) -> None:
    body = {"model": GPT, "input": "same question", "instructions": "Be brief."}
    with httpx2.stream("POST", url + "/v1/responses", json={**body, "stream": True}) as r:
        http_events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data:")]
    emulator.reset_cache()
    with gpt.responses.connect() as conn, bounded(conn):
        conn.send({"type": "response.create", **body})
        ws_events = [e.to_dict() for e in answer(conn)]
    assert [e["type"] for e in ws_events] == [e["type"] for e in http_events]
    assert ws_events[-1]["response"]["usage"] == http_events[-1]["response"]["usage"]
    assert (
        ws_events[-1]["response"]["output"][0]["content"]
        == (http_events[-1]["response"]["output"][0]["content"])
    )


def test_generate_false_caches_the_prompt_without_using_a_scripted_reply(
    gpt: openai.OpenAI, emulator: Emulator
) -> None:
    emulator.script(Reply("The real answer."))
    with gpt.responses.connect() as conn, bounded(conn):
        conn.send(create(LONG, instructions="Be brief.", generate=False))
        prepared = answer(conn)
        assert emulator.pending_replies == 1
        conn.send(
            create(
                "now answer",
                instructions="Be brief.",
                previous_response_id=prepared[-1].response.id,
            )
        )
        answered = answer(conn)
    [created, done] = prepared
    assert created.type == "response.created" and done.response.output == []
    assert done.response.usage.output_tokens == 0
    assert done.response.usage.input_tokens >= count_tokens(LONG)
    usage, prepared_tokens = answered[-1].response.usage, done.response.usage.input_tokens
    # The continuation is the prepared prompt plus the new ask: the prepared prompt comes from
    # the cache (in OpenAI's 128-token steps).
    assert usage.input_tokens > prepared_tokens
    assert prepared_tokens - 128 < usage.input_tokens_details.cached_tokens <= prepared_tokens
    assert answered[-1].response.output_text == "The real answer."


def test_error_reply_is_one_error_event_with_its_status(
    gpt: openai.OpenAI, emulator: Emulator
) -> None:
    emulator.script(Reply.error(429, "Slow down.", "rate_limit_exceeded"))
    with gpt.responses.connect() as conn, bounded(conn):
        conn.send(create("hi"))
        [error] = answer(conn)
        conn.send(create("and now?"))  # the socket stays usable
        assert answer(conn)[-1].type == "response.completed"
    assert error.type == "error" and error.status == 429
    assert error.error.message == "Slow down." and error.error.type == "rate_limit_exceeded"


def test_events_echo_the_lane_of_their_create(url: str, emulator: Emulator) -> None:
    with raw(url) as ws:
        ws.send(json.dumps(create("hi", stream_id="lane-a")))
        events = [json.loads(ws.recv(timeout=5)) for _ in range(2)]
    assert {e["stream_id"] for e in events} == {"lane-a"}


def test_refuse_websocket_answers_the_handshake_with_that_status(
    url: str, emulator: Emulator
) -> None:
    emulator.refuse_websocket = 426
    with pytest.raises(InvalidStatus) as refused, raw(url, authorization="Bearer k"):
        pass
    assert refused.value.response.status_code == 426
    assert json.loads(refused.value.response.body)["error"]["message"]
    [handshake] = emulator.requests
    assert (handshake.method, handshake.header("authorization")) == ("GET", "Bearer k")


def test_cut_after_drops_the_connection_without_a_close_frame(url: str, emulator: Emulator) -> None:
    emulator.script(Reply("A longer answer that will not arrive in full.", cut_after=3))
    received = []
    with raw(url) as ws, pytest.raises(ConnectionClosedError) as cut:
        ws.send(json.dumps(create("hi")))
        while True:
            received.append(json.loads(ws.recv(timeout=5)))
    assert len(received) == 3 and cut.value.rcvd is None
    assert emulator.open_websockets == 0


def test_a_client_that_leaves_stops_a_slow_answer(url: str, emulator: Emulator) -> None:
    emulator.script(Reply(" ".join(["word"] * 60), delay=0.05))
    with raw(url) as ws:
        ws.send(json.dumps(create("hi")))
        ws.recv(timeout=5)
    for _ in range(200):
        if emulator.open_websockets == 0:
            break
        threading.Event().wait(0.01)
    assert emulator.open_websockets == 0
