"""What the SDKs cannot send: malformed bodies, unknown routes, raw wire framing."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from ember.testing import Emulator, Reply

ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
OPENAI_HEADERS = {"authorization": "Bearer k"}


def post(
    url: str, path: str, body: bytes | dict[str, Any], headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, headers={"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_anthropic_malformed_json(url: str, path: str) -> None:
    status, _, body = post(url, path, b"{not json", ANTHROPIC_HEADERS)
    assert status == 400
    error = json.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_openai_malformed_json(url: str, path: str) -> None:
    status, _, body = post(url, path, b"[1, 2", OPENAI_HEADERS)
    assert status == 400
    assert set(json.loads(body)["error"]) == {"message", "type", "param", "code"}


def test_missing_fields_are_400_and_keep_the_script(url: str, emulator: Emulator) -> None:
    emulator.script(Reply("kept"))
    body = {"model": "claude-sonnet-4-5", "messages": []}
    status, _, raw = post(url, "/v1/messages", body, ANTHROPIC_HEADERS)
    assert status == 400 and "max_tokens" in json.loads(raw)["error"]["message"]
    status, _, raw = post(url, "/v1/chat/completions", {"model": "gpt-5"}, OPENAI_HEADERS)
    assert status == 400 and json.loads(raw)["error"]["param"] == "messages"
    assert emulator.pending_replies == 1


def test_prewarm_with_zero_max_tokens(url: str) -> None:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 0,
        "messages": [{"role": "user", "content": "hi"}],
    }
    status, _, raw = post(url, "/v1/messages", body, ANTHROPIC_HEADERS)
    message = json.loads(raw)
    assert status == 200 and message["content"] == [] and message["stop_reason"] == "max_tokens"
    assert message["usage"]["output_tokens"] == 0
    status, _, _ = post(url, "/v1/messages", {**body, "stream": True}, ANTHROPIC_HEADERS)
    assert status == 400


def test_unknown_route_uses_the_callers_error_shape(url: str) -> None:
    status, _, raw = post(url, "/v1/nope", {}, ANTHROPIC_HEADERS)
    assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error"
    status, _, raw = post(url, "/v1/nope", {}, OPENAI_HEADERS)
    assert status == 404 and json.loads(raw)["error"]["param"] is None


def test_healthz_and_query_string_are_recorded(url: str, emulator: Emulator) -> None:
    with urllib.request.urlopen(url + "/healthz?probe=1", timeout=5) as response:
        assert response.status == 200 and json.loads(response.read()) == {"status": "ok"}
    recorded = emulator.last_request
    assert (recorded.method, recorded.path, recorded.query_string) == ("GET", "/healthz", "probe=1")


def test_anthropic_sse_framing(url: str) -> None:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    status, headers, raw = post(url, "/v1/messages", body, ANTHROPIC_HEADERS)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = raw.decode().strip().split("\n\n")
    for event in events:
        name, data = event.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[6:])["type"] == name[7:]
    assert [e.split("\n")[0][7:] for e in events[:2]] == ["message_start", "ping"]
    delta = json.loads(events[-2].split("\n")[1][6:])
    assert set(delta["usage"]) >= {"output_tokens", "cache_read_input_tokens"}


def test_chat_sse_framing_ends_with_done(url: str) -> None:
    body: dict[str, Any] = {
        "model": "gpt-5",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    _, _, raw = post(url, "/v1/chat/completions", body, OPENAI_HEADERS)
    events = raw.decode().strip().split("\n\n")
    assert events[-1] == "data: [DONE]"
    usage_chunk = json.loads(events[-2][6:])
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] > 0
    assert all(json.loads(e[6:])["object"] == "chat.completion.chunk" for e in events[:-1])
