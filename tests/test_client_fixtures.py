"""The recorded requests of the real agent CLIs stay usable: well-formed, replayable, scrubbed."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from ember.server import BackgroundServer
from ember.testing import Emulator
from tests.client_fixtures import CLIENTS, PROJECT_DIR, ClientRequest, all_requests, scenarios

REQUESTS = all_requests()
MODEL_CALLS = [r for r in REQUESTS if r.is_model_call]
_CWD = re.compile(
    r"(?:Primary working directory|Working directory|I'm currently working in the directory): "
    r"(\S+)|<cwd>([^<]*)</cwd>"
)
#: The header each client names its session in (the others name none).
SESSION_HEADER = {
    "claude-code": "x-claude-code-session-id",
    "codex": "session-id",
    "opencode": "x-session-id",
}
#: Where each wire format carries the key, as recorded (scrubbed) and as replayed.
KEY_HEADER = {
    "/v1/messages": ("x-api-key", "<redacted>"),
    "/v1/chat/completions": ("authorization", "Bearer <redacted>"),
    "/v1/responses": ("authorization", "Bearer <redacted>"),
    "gemini": ("x-goog-api-key", "<redacted>"),
}
#: A path under a real home directory (the recording user's). Codex's own agent paths, which
#: read like one, are scrubbed to ``/agent-root/...``; ``/tmp`` stays (Claude Code's prompt
#: names it), and so does OpenCode's quoting example ``mkdir "/Users/name/My Documents"``.
_MACHINE_PATH = re.compile(r"(?<![<\w])/(?:root|Users/(?!name/My Documents)\w+)(?=[/`\"\\\s]|$)")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def _ids(requests: list[ClientRequest]) -> list[str]:
    return [r.name for r in requests]


def _wire(path: str) -> str:
    return "gemini" if path.startswith("/v1beta/models/") else path


def test_every_client_and_its_continued_sessions_are_recorded() -> None:
    recorded = scenarios()
    assert {client for client, _ in recorded} == set(CLIENTS)
    kinds = {r.kind for r in REQUESTS}
    assert {"main", "subagent", "title", "compaction", "websocket-attempt"} <= kinds


@pytest.mark.parametrize("request_", REQUESTS, ids=_ids(REQUESTS))
def test_recorded_request_is_well_formed_for_its_protocol(request_: ClientRequest) -> None:
    headers = request_.headers
    if "content-length" in headers:
        assert int(headers["content-length"]) == len(request_.body)
    if not request_.is_model_call:
        assert request_.kind in ("probe", "websocket-attempt") and not request_.body
        return
    body = request_.json()
    wire = _wire(request_.path)
    name, value = KEY_HEADER[wire]
    assert isinstance(body, dict) and headers[name] == value
    if wire == "gemini":
        assert request_.path.endswith((":streamGenerateContent", ":generateContent"))
        assert isinstance(body["contents"], list) and body["contents"]
        return
    assert isinstance(body["model"], str) and body["stream"] is True
    if wire == "/v1/messages":
        assert "anthropic-version" in headers
        assert isinstance(body["max_tokens"], int) and body["messages"]
    elif wire == "/v1/chat/completions":
        assert isinstance(body["messages"], list) and body["messages"]
    else:
        assert wire == "/v1/responses"
        assert isinstance(body["input"], list) and body["input"]
    if request_.client == "claude-code":
        assert request_.query == "beta=true"


def test_scrubbing_kept_one_session_and_one_project_per_scenario() -> None:
    """A re-recording that leaks a machine path or splits a session fails here, not in the
    resolution tests built on these fixtures."""
    for client, name in scenarios():
        calls = [r for r in MODEL_CALLS if (r.client, r.scenario) == (client, name)]
        assert calls, f"{client}/{name} has no model call"
        assert len({r.session_id() for r in calls}) == 1, f"{client}/{name}: sessions differ"
        header = SESSION_HEADER.get(client)
        if header is not None:
            assert {r.headers[header] for r in calls} == {calls[0].session_id()}
        for r in calls:
            assert b"sk-test" not in r.body
            shown = r.body.decode("utf-8") + "".join(r.headers.values())
            assert not _MACHINE_PATH.search(shown), f"{r.name}: {_MACHINE_PATH.search(shown)}"
            named = {a or b for text in _strings(r.json()) for a, b in _CWD.findall(text)}
            assert named <= {PROJECT_DIR}, r.name


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    with BackgroundServer(Emulator()) as server:
        yield server.url


@pytest.mark.parametrize("request_", MODEL_CALLS, ids=_ids(MODEL_CALLS))
def test_recorded_model_call_replays_against_the_emulator_without_400(
    request_: ClientRequest, emulator_url: str
) -> None:
    """Scrubbing must not break a body (thinking signatures, cache_control, JSON): tests
    replay these bytes through the proxy."""
    keep = ("content-type", "anthropic-version", "anthropic-beta", "accept")
    headers = {k: v for k, v in request_.headers.items() if k in keep}
    name, _ = KEY_HEADER[_wire(request_.path)]
    headers[name] = "Bearer test" if name == "authorization" else "test"
    query = f"?{request_.query}" if request_.query else ""
    sent = urllib.request.Request(
        emulator_url + request_.path + query, data=request_.body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(sent, timeout=10) as response:
            status, answer = response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            status, answer = error.code, error.read()
    assert status == 200, answer[:300]
