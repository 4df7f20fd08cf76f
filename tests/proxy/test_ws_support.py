"""The rules that decide how a WebSocket upgrade is answered, and the wire helpers they use."""

from __future__ import annotations

import json

import pytest

from ember.protocols.responses_ws import error_event, event_head
from ember.proxy.websocket import accept_headers, upstream_headers, ws_url
from ember.proxy.ws_support import RefusalMemo, provider_lacks_websocket, refusal_reason


@pytest.mark.parametrize("status", [400, 404, 405, 426])
def test_http_only_provider_answers_mean_no_websocket(status: int) -> None:
    assert provider_lacks_websocket(status)


@pytest.mark.parametrize("status", [401, 403, 429, 500, 502, 503])
def test_key_quota_and_server_errors_are_not_taken_for_missing_websocket(status: int) -> None:
    """Remembering these would keep WebSocket off for every client because of one bad key."""
    assert not provider_lacks_websocket(status)


def test_refusal_reasons() -> None:
    assert refusal_reason("auto", None, remembered=False) is None
    assert refusal_reason("auto", None, remembered=True) is not None
    assert refusal_reason("on", None, remembered=True) is None  # always asks the provider
    assert "openai_websocket" in str(refusal_reason("off", "a stage", remembered=False))
    assert refusal_reason("on", "memory tools", remembered=False) == "memory tools; use HTTP"


def test_a_remembered_refusal_expires() -> None:
    now = [100.0]
    memo = RefusalMemo(ttl=600.0, clock=lambda: now[0])
    memo.remember("wss://a/v1/responses")
    assert memo.refused("wss://a/v1/responses") and not memo.refused("wss://b/v1/responses")
    now[0] += 599.0
    assert memo.refused("wss://a/v1/responses")
    now[0] += 1.0
    assert not memo.refused("wss://a/v1/responses")


def test_ws_url_follows_the_configured_openai_url() -> None:
    assert ws_url("https://api.openai.com/v1", "") == "wss://api.openai.com/v1/responses"
    assert ws_url("http://127.0.0.1:9000/v1", "a=1") == "ws://127.0.0.1:9000/v1/responses?a=1"


def test_handshake_headers_of_one_hop_are_not_forwarded() -> None:
    client = [
        ("sec-websocket-key", "abc"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-extensions", "permessage-deflate"),
        ("upgrade", "websocket"),
        ("connection", "Upgrade"),
        ("authorization", "Bearer k"),
        ("openai-beta", "responses_websockets=2026-02-06"),
        ("x-ember-cwd", "/w"),
    ]
    assert upstream_headers(client) == [
        ("authorization", "Bearer k"),
        ("openai-beta", "responses_websockets=2026-02-06"),
    ]
    answer = [("Sec-WebSocket-Accept", "x"), ("Upgrade", "websocket"), ("x-codex-turn-state", "t")]
    assert accept_headers(answer) == [(b"x-codex-turn-state", b"t")]


def test_event_head_reads_type_and_lane() -> None:
    head = event_head('{"type":"response.completed","stream_id":"a","response":{"id":"r1"}}')
    assert (head.type, head.lane, head.terminal) == ("response.completed", "a", True)
    assert head.response_id == "r1"
    assert event_head('{"type":"response.output_text.delta","item_id":"m"}').response_id is None
    assert not event_head('{"type":"response.output_text.delta"}').terminal
    assert event_head("not json").type is None


def test_error_event_has_the_websocket_error_shape() -> None:
    event = json.loads(error_event(400, "ember: bad", stream_id="a"))
    assert event["type"] == "error" and event["status"] == 400 and event["stream_id"] == "a"
    assert event["error"]["message"] == "ember: bad"
    assert event["error"]["type"] == "invalid_request_error"
