"""Request headers past ``max_header_kb``: a 431 that names the setting, the connection closed
before the rest is read, and the proxy serving the next client as before. Raw sockets where an
SDK would not send such a request, the official SDKs where it would."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import anthropic
import openai
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

MSG: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
MIB = 1 << 20


def _socket(stack: Stack) -> socket.socket:
    host, port = stack.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=20)
    return sock


def _head(extra: str = "", length: int = 0) -> bytes:
    return (
        "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {length}\r\n{extra}"
    ).encode()


def _read_all(sock: socket.socket) -> bytes:
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk


def _claude(stack: Stack) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0)


def _answers(stack: Stack) -> bool:
    with _claude(stack) as client:
        reply = client.messages.create(**MSG)
    return reply.content[0].type == "text"


def test_an_8_mib_header_gets_a_431_and_the_proxy_keeps_serving(make_stack: StackFactory) -> None:
    stack = make_stack()
    started = time.monotonic()
    with _socket(stack) as sock:
        sock.sendall(_head() + b"x-filler: ")
        sent = 0
        try:
            while sent < 8 * MIB:  # bounded: never more than the 8 MiB
                sock.sendall(b"a" * 65536)
                sent += 65536
            sock.sendall(b"\r\n\r\n")
        except OSError:  # the proxy closed after a while of dropping what came
            pass
        answer = _read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    message = json.loads(body)["error"]["message"]
    assert "larger than the proxy's 64 KiB limit" in message
    assert "EMBER_MAX_HEADER_KB" in message
    assert time.monotonic() - started < 10  # not the header timeout (30 s)
    assert _answers(stack)
    assert stack.emulator.requests[-1].path == "/v1/messages"
    assert len([r for r in stack.emulator.requests if r.path == "/v1/messages"]) == 1


def test_both_sdks_show_the_431_and_its_message(make_stack: StackFactory) -> None:
    stack = make_stack()
    big = {"x-trace": "t" * 100_000}
    with _claude(stack) as claude, pytest.raises(anthropic.APIStatusError) as refused:
        claude.messages.create(**MSG, extra_headers=big)
    assert refused.value.status_code == 431
    assert "EMBER_MAX_HEADER_KB" in refused.value.message
    gpt = openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)
    with gpt, pytest.raises(openai.APIStatusError) as refused_too:
        gpt.responses.create(model="gpt-5.1", input="hi", extra_headers=big)
    assert refused_too.value.status_code == 431
    assert "EMBER_MAX_HEADER_KB" in refused_too.value.message
    assert not [r for r in stack.emulator.requests if r.path != "/healthz"]  # none forwarded
    assert _answers(stack)


@pytest.mark.parametrize("pieces", [1, 64], ids=["one write", "many writes"])
def test_the_limit_is_the_setting_just_under_passes_just_over_is_refused(
    make_stack: StackFactory, pieces: int
) -> None:
    stack = make_stack(max_header_kb=4)
    body = json.dumps(MSG).encode()

    def status(filler: int) -> int:
        request = _head(f"x-filler: {'f' * filler}\r\n\r\n", len(body)) + body
        step = -(-len(request) // pieces)
        with _socket(stack) as sock:
            for at in range(0, len(request), step):
                sock.sendall(request[at : at + step])
            return int(_read_all_first_line(sock).split()[1])

    assert status(3 * 1024) == 200
    assert status(5 * 1024) == 431


def _read_all_first_line(sock: socket.socket) -> bytes:
    got = b""
    while b"\r\n" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got.split(b"\r\n", 1)[0]


def test_a_websocket_upgrade_with_headers_past_the_limit_is_refused(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(max_header_kb=4)
    url = "ws" + stack.url.removeprefix("http") + "/v1/responses"
    big = {"authorization": "Bearer sk-test", "x-filler": "f" * 8192}
    with pytest.raises(InvalidStatus) as refused, connect(url, additional_headers=big):
        pass
    assert refused.value.response.status_code == 431
    gpt = openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)
    with gpt, gpt.responses.connect() as conn:  # a normal upgrade still goes through
        conn.response.create(model="gpt-5.1", input="hi")
        for event in conn:
            if event.type in ("response.completed", "error"):
                assert event.type == "response.completed"
                break


def test_a_large_body_is_no_header_nor_is_one_before_a_kept_alive_request(
    make_stack: StackFactory,
) -> None:
    """A 200 KiB body sent with its headers in one write, then a second request on the same
    connection: neither is taken for headers past a 4 KiB limit."""
    stack = make_stack(max_header_kb=4)
    first = json.dumps(dict(MSG, metadata={"user_id": "u" * 200_000})).encode()
    second = json.dumps(MSG).encode()
    with _socket(stack) as sock:
        statuses = []
        for body in (first, second):
            sock.sendall(_head("\r\n", len(body)) + body)
            statuses.append(_response_status(sock))
    assert statuses == [200, 200]


def _response_status(sock: socket.socket) -> int:
    """The status of the next response on a kept-alive connection (its body read too)."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        assert chunk, "closed"
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(head.split()[1])
