"""Bodies past the size and nesting limits: a 413 / 400 in the protocol's own shape that names
the setting, through the real server on loopback, without the proxy's memory growing."""

from __future__ import annotations

import json
import socket
import tracemalloc
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from ember.errors import RequestTooLarge
from ember.proxy.limits import MIB, read_body
from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

MSG = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
ENDPOINTS: dict[str, dict[str, Any]] = {
    "/v1/messages": MSG,
    "/v1/chat/completions": {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "gpt-5", "input": "hi"},
}


def _assert_shape(path: str, err: dict[str, Any], kind: str) -> str:
    """The error in the wire format of ``path``; returns its message."""
    if path == "/v1/messages":
        assert err["type"] == "error" and err["error"]["type"] == kind
    else:
        assert set(err["error"]) == {"message", "type", "param", "code"}
    return str(err["error"]["message"])


def _deep_body(path: str, depth: int) -> bytes:
    """A valid request of exactly ``depth`` levels: the nesting sits in ``metadata``."""
    inner = b"[" * (depth - 1) + b'"x"' + b"]" * (depth - 1)
    return json.dumps(ENDPOINTS[path]).encode()[:-1] + b', "metadata": ' + inner + b"}"


# -- body size ---------------------------------------------------------------------------------


def test_declared_oversize_body_is_413_before_it_is_sent(make_stack: StackFactory) -> None:
    stack = make_stack(max_body_mb=1)
    host, port = stack.url.removeprefix("http://").split(":")
    head = (
        b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"anthropic-version: 2023-06-01\r\ncontent-length: " + str(1 << 30).encode() + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(head)  # a 1 GiB body announced, not one byte of it sent
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413")
    err = json.loads(rest.partition(b"\r\n\r\n")[2])
    message = _assert_shape("/v1/messages", err, "request_too_large")
    assert "1 MiB" in message and "EMBER_MAX_BODY_MB" in message
    assert stack.emulator.requests == []


def test_chunked_oversize_body_is_413_and_the_proxy_does_not_hold_it(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(max_body_mb=1)
    piece = b" " * 65536

    def sixteen_mib() -> Iterator[bytes]:
        yield b'{"model":"gpt-5","messages":[],"pad":"'
        for _ in range(256):
            yield piece
        yield b'"}'

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        r = httpx2.post(stack.url + "/v1/chat/completions", content=sixteen_mib(), timeout=30)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert r.status_code == 413
    message = _assert_shape("/v1/chat/completions", r.json(), "")
    assert "EMBER_MAX_BODY_MB" in message
    # 16 MiB went through the socket; the proxy held at most the 1 MiB limit and a few chunks.
    assert peak < 6 * MIB, f"peak {peak / MIB:.1f} MiB"
    assert stack.emulator.requests == []
    # the connection and the proxy are fine afterwards
    ok = httpx2.post(stack.url + "/v1/chat/completions", json=ENDPOINTS["/v1/chat/completions"])
    assert ok.status_code == 200


def test_body_at_the_limit_is_served_one_byte_more_is_413(make_stack: StackFactory) -> None:
    stack = make_stack(max_body_mb=1)
    head = json.dumps(MSG).encode()[:-1] + b', "metadata": {"pad": "'
    fill = MIB - len(head) - len(b'"}}')
    exact = head + b"x" * fill + b'"}}'
    assert len(exact) == MIB
    assert httpx2.post(stack.url + "/v1/messages", content=exact).status_code == 200
    over = head + b"x" * (fill + 1) + b'"}}'
    assert httpx2.post(stack.url + "/v1/messages", content=over).status_code == 413


def test_pass_through_paths_have_the_same_body_cap(make_stack: StackFactory) -> None:
    stack = make_stack(max_body_mb=1)
    big = b"{" + b" " * (2 * MIB) + b"}"
    r = httpx2.post(
        stack.url + "/v1/messages/count_tokens",
        content=big,
        headers={"anthropic-version": "2023-06-01", "x-ember-bypass": "1"},
    )
    assert r.status_code == 413
    _assert_shape("/v1/messages", r.json(), "request_too_large")
    r = httpx2.post(stack.url + "/v1/embeddings", content=big)
    assert r.status_code == 413 and "EMBER_MAX_BODY_MB" in r.json()["error"]["message"]
    assert stack.emulator.requests == []


def test_sdk_sees_a_413_status_error_naming_the_setting(make_stack: StackFactory) -> None:
    stack = make_stack(max_body_mb=1)
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        pytest.raises(anthropic.APIStatusError) as err,
    ):
        c.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=8,
            messages=[{"role": "user", "content": "x" * (2 * MIB)}],
        )
    assert err.value.status_code == 413
    assert "EMBER_MAX_BODY_MB" in err.value.message


def _receive_from(messages: list[dict[str, Any]], calls: list[int]) -> Any:
    async def receive() -> dict[str, Any]:
        calls.append(1)
        return messages[len(calls) - 1]

    return receive


async def test_reader_refuses_a_declared_oversize_body_without_reading() -> None:
    calls: list[int] = []
    with pytest.raises(RequestTooLarge):
        await read_body(_receive_from([], calls), {"content-length": str(MIB + 1)}, MIB)
    assert calls == []


async def test_reader_stops_reading_a_chunked_body_once_past_the_limit() -> None:
    chunk = {"type": "http.request", "body": b"x" * 1000, "more_body": True}
    calls: list[int] = []
    with pytest.raises(RequestTooLarge):
        await read_body(_receive_from([chunk] * 1000, calls), {}, 10_000)
    assert len(calls) == 11  # 11 000 bytes: the first chunk past 10 000, and not one more


# -- nesting depth -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_body_nested_past_the_limit_is_400_in_protocol_shape(
    make_stack: StackFactory, path: str
) -> None:
    stack = make_stack(max_json_depth=32)
    at_limit = httpx2.post(stack.url + path, content=_deep_body(path, 32))
    assert at_limit.status_code == 200  # forwarded: the emulator ignores metadata it cannot use
    r = httpx2.post(stack.url + path, content=_deep_body(path, 33))
    assert r.status_code == 400
    message = _assert_shape(path, r.json(), "invalid_request_error")
    assert "32 levels" in message and "EMBER_MAX_JSON_DEPTH" in message
    assert len(stack.emulator.requests) == 1


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_100k_deep_body_is_400_not_500(full_stack: Stack, path: str) -> None:
    r = httpx2.post(full_stack.url + path, content=_deep_body(path, 100_000))
    assert r.status_code == 400
    assert "EMBER_MAX_JSON_DEPTH" in _assert_shape(path, r.json(), "invalid_request_error")
    assert full_stack.emulator.requests == []


def test_deep_body_on_a_pass_through_path_is_forwarded_not_refused(stack: Stack) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    r = httpx2.post(stack.url + "/v1/batches", content=deep, headers={"x-api-key": "k"})
    assert r.status_code == 404  # the emulator's answer: ember forwarded it untouched
    assert stack.emulator.last_request.body == deep
