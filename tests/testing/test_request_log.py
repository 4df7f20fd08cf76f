"""The emulator's request log: the fields of a line, and never a credential."""

from __future__ import annotations

import io
import json

from ember.shadow.question import hot_question
from ember.store.transcript_rows import Message
from ember.testing.emulator import RecordedRequest
from ember.testing.endpoints import Pending, Usage
from ember.testing.render_common import json_response
from ember.testing.replies import Reply
from ember.testing.request_log import RequestLog, entry
from ember.testing.shadow import shadow_replies

SECRET = "sk-secret-123"


def _request(body: bytes, method: str = "POST") -> RecordedRequest:
    headers = [("x-api-key", SECRET), ("authorization", f"Bearer {SECRET}")]
    return RecordedRequest(method, "/v1/messages", f"key={SECRET}", headers, body)


def test_a_shadow_answer_is_logged_with_its_path_facts_and_usage() -> None:
    msg = Message(1, "m000000000001", "s", 1, 0, "user", "user", "The database is PostgreSQL 16.")
    body = {
        "model": "claude-sonnet-4-5",
        "stream": True,
        "messages": [{"role": "user", "content": hot_question([msg], "s")}],
    }
    reply = shadow_replies()(body, "/v1/messages")
    pending = Pending(reply, lambda: (json_response(200, {}), Usage(40, 5120, 0, 61)))
    pending.finish()
    line = entry("http", _request(json.dumps(body).encode()), pending, 1767225600.1234)
    assert line == {
        "time": 1767225600.123,
        "transport": "http",
        "method": "POST",
        "path": "/v1/messages",
        "model": "claude-sonnet-4-5",
        "stream": True,
        "shadow": "hot",
        "facts": 1,
        "usage": {
            "input_tokens": 40,
            "cache_read_tokens": 5120,
            "cache_write_tokens": 0,
            "output_tokens": 61,
        },
    }


def test_a_request_never_answered_or_not_json_has_no_usage_and_no_secret() -> None:
    out = io.StringIO()
    log = RequestLog(out, clock=lambda: 1.0)
    log.note("http", _request(b'{"api_key": "' + SECRET.encode()), None)
    log.note("websocket", _request(b"", "GET"), None)
    waiting = Pending(Reply("hi"), lambda: (json_response(200, {}), Usage(1)))
    log.note("websocket", _request(b'{"model": "gpt-5", "input": "hi"}', "WEBSOCKET"), waiting)
    text = out.getvalue()
    assert SECRET not in text
    first, handshake, message = (json.loads(x) for x in text.splitlines())
    assert first["usage"] is None and first["model"] is None and first["shadow"] == "none"
    assert (handshake["method"], handshake["stream"]) == ("GET", False)
    assert (message["transport"], message["stream"], message["facts"]) == ("websocket", True, 0)
    assert message["usage"] is None  # finish never ran: the caller left first
