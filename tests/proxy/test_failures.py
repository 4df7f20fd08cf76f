"""Upstream failures, bad input and odd clients: the proxy answers in the protocol's own shape
and never crashes."""

from __future__ import annotations

import json
import socket
import threading

import anthropic
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.server import free_port
from ember.store.accounting import exchanges
from ember.testing import Reply
from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

MSG = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
ENDPOINTS = {
    "/v1/messages": MSG,
    "/v1/chat/completions": {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "gpt-5", "input": "hi"},
}


def _rows(stack: Stack) -> list[dict[str, object]]:
    stack.settle()
    return exchanges(stack.home / "stats.db")


@pytest.mark.parametrize("status", [400, 401, 429, 500, 529])
def test_upstream_errors_keep_status_and_body(stack: Stack, status: int) -> None:
    stack.emulator.script(Reply.error(status, f"boom {status}"))
    r = httpx2.post(stack.url + "/v1/messages", json=MSG, headers={"x-api-key": "k"})
    assert r.status_code == status
    err = r.json()
    assert err["type"] == "error" and err["error"]["message"] == f"boom {status}"
    stack.emulator.script(Reply.error(status, "direct"))
    direct = httpx2.post(stack.upstream_url + "/v1/messages", json=MSG, headers={"x-api-key": "k"})
    assert direct.json()["error"]["type"] == err["error"]["type"]
    assert _rows(stack)[-1]["outcome"] == "upstream_error"


def test_sdk_sees_upstream_error_class(stack: Stack) -> None:
    stack.emulator.script(Reply.error(429, "slow down", headers={"retry-after": "7"}))
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        pytest.raises(anthropic.RateLimitError) as err,
    ):
        c.messages.create(**MSG)  # type: ignore[arg-type]
    assert err.value.response.headers["retry-after"] == "7"


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_timeout_becomes_504_in_protocol_shape(make_stack: StackFactory, path: str) -> None:
    stack = make_stack(upstream_read_timeout=0.3)
    stack.emulator.script(Reply("late", delay_headers=2.0))
    r = httpx2.post(stack.url + path, json=ENDPOINTS[path], headers={"x-api-key": "k"})
    assert r.status_code == 504
    body = r.json()
    message = body["error"]["message"]
    assert "timeout" in message
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "timeout_error"
    assert _rows(stack)[-1]["outcome"] == "timeout"


def test_unreachable_provider_is_502_and_sdk_gets_an_api_error(make_stack: StackFactory) -> None:
    stack = make_stack(upstream=f"http://127.0.0.1:{free_port()}")
    with (
        openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0) as c,
        pytest.raises(openai.APIStatusError) as err,
    ):
        c.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 502
    assert "cannot reach provider" in err.value.message
    rows = _rows(stack)
    assert rows[-1]["outcome"] == "unreachable" and rows[-1]["cost_usd"] == 0.0


def test_cut_stream_is_cut_for_the_client(stack: Stack) -> None:
    stack.emulator.script(Reply("a long answer that will never finish " * 5, cut_after=4))
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        pytest.raises((httpx2.RemoteProtocolError, anthropic.APIError)),
        c.messages.stream(**MSG) as s,  # type: ignore[arg-type]
    ):
        for _ in s:
            pass
    row = _rows(stack)[-1]
    assert row["outcome"] == "cut" and row["usage_known"] == 1


def test_cut_json_answer_is_a_502(stack: Stack) -> None:
    stack.emulator.script(Reply("half", cut_after=1))
    r = httpx2.post(stack.url + "/v1/chat/completions", json=ENDPOINTS["/v1/chat/completions"])
    assert r.status_code == 502 and "cut" in r.json()["error"]["message"]


@pytest.mark.parametrize("path", list(ENDPOINTS))
@pytest.mark.parametrize("body", [b"{not json", b"[1,2]", b"\xff\xfe", b""])
def test_malformed_bodies_get_400_in_protocol_shape(stack: Stack, path: str, body: bytes) -> None:
    r = httpx2.post(stack.url + path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()
    if path == "/v1/messages":
        assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    else:
        assert err["error"]["type"] == "invalid_request_error"
    assert stack.emulator.requests == []


def test_bypass_forwards_untouched_and_records_nothing(stack: Stack) -> None:
    raw = (
        b'{"model": "claude-sonnet-4-5",  "max_tokens":5,'
        b' "messages":[{"role":"user","content":"q"}]}'
    )
    r = httpx2.post(
        stack.url + "/v1/messages",
        content=raw,
        headers={"x-ember-bypass": "1", "x-api-key": "k", "x-ember-project-id": "p"},
    )
    assert r.status_code == 200
    got = stack.emulator.last_request
    assert got.body == raw
    assert got.header("x-ember-bypass") is None and got.header("x-ember-project-id") is None
    stack.settle()
    assert not (stack.home / "stats.db").exists()
    assert not (stack.home / "projects").exists()


def test_client_disconnect_mid_stream_is_recorded_as_cancelled(stack: Stack) -> None:
    stack.emulator.script(Reply("word " * 200, delay=0.05))
    with httpx2.stream("POST", stack.url + "/v1/messages", json={**MSG, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("event: content_block_delta"):
                break
    row = _wait_for_row(stack)
    assert row["outcome"] == "cancelled"


def _wait_for_row(stack: Stack) -> dict[str, object]:
    for _ in range(100):
        rows = _rows(stack)
        if rows:
            return rows[-1]
        threading.Event().wait(0.05)
    raise AssertionError("no accounting row")


def test_garbage_on_the_socket_does_not_kill_the_proxy(stack: Stack) -> None:
    host, port = stack.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        s.recv(1024)
    r = httpx2.get(stack.url + "/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_wrong_shapes_inside_valid_json_are_forwarded_not_crashed_on(stack: Stack) -> None:
    odd = {"model": 5, "messages": "not a list", "system": {"weird": True}, "metadata": []}
    r = httpx2.post(stack.url + "/v1/messages", content=json.dumps(odd).encode())
    assert r.status_code == 400  # the emulator (like the provider) refuses it, ember forwards it
    assert stack.emulator.last_request.json() == odd


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=15,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "model": json_values,
        "messages": json_values,
        "system": json_values,
        "input": json_values,
        "stream": json_values,
        "metadata": json_values,
        "instructions": json_values,
        "max_tokens": json_values,
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(list(ENDPOINTS)), body=request_like | json_values, raw=st.binary())
def test_no_input_crashes_the_proxy(stack: Stack, path: str, body: object, raw: bytes) -> None:
    for content in (json.dumps(body).encode(), raw):
        r = httpx2.post(stack.url + path, content=content, timeout=10)
        assert r.status_code != 500, r.text
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            r.json()  # always a JSON answer in some protocol's shape
    assert httpx2.get(stack.url + "/healthz").status_code == 200
