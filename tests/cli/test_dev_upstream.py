"""``ember dev upstream``: the emulator it serves plays the model for shadow memory (hot and
cold, every wire format, HTTP and WebSocket), and ``--log`` notes every request without a
credential."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from websockets.sync.client import connect

from ember.cli import cli
from ember.cli.dev import upstream_emulator
from ember.protocols.plain import plain_request
from ember.server import BackgroundServer
from ember.shadow.question import cold_pages, cold_prompt, hot_question, parse_answer
from ember.store.transcript_rows import Message
from ember.testing import Emulator

SECRET = "sk-secret-123"
SESSION = "5ead0000-0000-4000-8000-00000000000f"
MODELS = {"anthropic": "claude-sonnet-4-5", "openai_chat": "gpt-5", "openai_responses": "gpt-5"}
PATHS = {
    "anthropic": "/v1/messages",
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
}
LONG = (
    "<system-reminder>The user is on Linux.</system-reminder> We always use uv, never pip. "
    "The staging database is reset every night at 02:00 UTC by the cron job in ops/cron.yaml, "
    "so keep nothing there that you need the next day."
)
TRANSCRIPT = [
    ("user", "Deploys go to fly.io. Tests run with pytest -x. What is in this directory?"),
    ("assistant", "It holds a Python package and a Makefile."),
    ("user", "Please read notes.txt and tell me what it says."),
    ("tool_result", "The database is PostgreSQL 16."),
    ("user", LONG),  # shortened in the hot question: its cut-off sentence is never proposed
    ("user", "thanks!"),
]
MESSAGES = [
    Message(i, f"m{i:012x}", SESSION, 1, i, "tool" if k == "tool_result" else k, k, text)
    for i, (k, text) in enumerate(TRANSCRIPT, 1)
]
HOT_FACTS = [
    ("Deploys go to fly.io.", MESSAGES[0].id),
    ("Tests run with pytest -x.", MESSAGES[0].id),
    ("We always use uv, never pip.", MESSAGES[4].id),
]
STAGING = (
    "The staging database is reset every night at 02:00 UTC by the cron job in ops/cron.yaml, "
    "so keep nothing there that you need the next day."
)
COLD_FACTS = [*HOT_FACTS, (STAGING, MESSAGES[4].id)]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Emulator, str, Path]]:
    log = tmp_path / "requests.jsonl"
    with log.open("a", encoding="utf-8") as stream:
        emulator = upstream_emulator(stream)
        with BackgroundServer(emulator) as server:
            yield emulator, server.url, log


# -- what ember sends ----------------------------------------------------------------------------


def hot_body(protocol: str) -> dict[str, Any]:
    """A session's last request with the hot question appended as a last user message."""
    question = hot_question(MESSAGES, SESSION)
    first, answer = TRANSCRIPT[0][1], TRANSCRIPT[1][1]
    if protocol == "anthropic":
        return {
            "model": MODELS[protocol],
            "max_tokens": 1024,
            "system": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": first},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": [{"type": "text", "text": question}]},
            ],
        }
    if protocol == "openai_chat":
        return {
            "model": MODELS[protocol],
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": first},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": question},
            ],
        }
    return {
        "model": MODELS[protocol],
        "instructions": "You are a coding agent.",
        "input": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": [{"type": "input_text", "text": question}]},
        ],
    }


def cold_body(protocol: str) -> dict[str, Any]:
    [page] = cold_pages(MESSAGES)
    system, user = cold_prompt(page, SESSION)
    body: dict[str, Any] = json.loads(
        plain_request(protocol, "claude-haiku-4-5", system, user, 4096)
    )
    return body


def headers(protocol: str) -> dict[str, str]:
    if protocol == "anthropic":
        return {"x-api-key": SECRET, "anthropic-version": "2023-06-01"}
    return {"authorization": f"Bearer {SECRET}"}


def post(url: str, path: str, body: bytes, head: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url + path, data=body, headers={"content-type": "application/json", **head}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


def answer_text(protocol: str, answer: dict[str, Any]) -> str:
    if protocol == "anthropic":
        return "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    if protocol == "openai_chat":
        return str(answer["choices"][0]["message"]["content"])
    return "".join(
        c["text"]
        for item in answer["output"]
        if item["type"] == "message"
        for c in item["content"]
        if c["type"] == "output_text"
    )


def proposed(text: str) -> list[tuple[str, str]]:
    """(content, cited message id) of every fact of a fenced-json answer."""
    batch = parse_answer(text)
    return [(f["content"], e["messageId"]) for f in batch["facts"] for e in f["evidence"]]


# -- the shadow question answered --------------------------------------------------------------


@pytest.mark.parametrize("protocol", sorted(PATHS))
@pytest.mark.parametrize(("shape", "facts"), [("hot", HOT_FACTS), ("cold", COLD_FACTS)])
def test_a_shadow_question_gets_what_the_user_stated_with_its_message_ids(
    served: tuple[Emulator, str, Path],
    protocol: str,
    shape: str,
    facts: list[tuple[str, str]],
) -> None:
    _, url, _ = served
    body = hot_body(protocol) if shape == "hot" else cold_body(protocol)
    status, raw = post(url, PATHS[protocol], json.dumps(body).encode(), headers(protocol))
    assert status == 200, raw
    text = answer_text(protocol, json.loads(raw))
    assert text.startswith("```json\n")
    assert proposed(text) == facts
    for e in parse_answer(text)["facts"]:
        assert e["evidence"][0]["kind"] == "user-stated"


def test_any_other_request_gets_the_emulators_deterministic_answer(
    served: tuple[Emulator, str, Path],
) -> None:
    _, url, _ = served
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": "The db is PostgreSQL."}]}
    _, raw = post(url, PATHS["openai_chat"], json.dumps(body).encode(), headers("openai_chat"))
    text = answer_text("openai_chat", json.loads(raw))
    assert text.startswith("Noted: The db is PostgreSQL.") and "```" not in text


def ws_answer(ws: Any, body: dict[str, Any]) -> str:
    create = {k: v for k, v in body.items() if k != "store"}
    ws.send(json.dumps({"type": "response.create", **create}))
    while True:
        event = json.loads(ws.recv(timeout=10))
        assert event["type"] not in ("error", "response.failed"), event
        if event["type"] == "response.completed":
            return answer_text("openai_responses", event["response"])


def test_over_websocket_the_hot_and_cold_questions_are_answered_the_same_way(
    served: tuple[Emulator, str, Path],
) -> None:
    _, url, _ = served
    ws_url = "ws" + url[len("http") :] + "/v1/responses"
    with connect(ws_url, additional_headers=headers("openai_responses"), open_timeout=5) as ws:
        assert proposed(ws_answer(ws, hot_body("openai_responses"))) == HOT_FACTS
        assert proposed(ws_answer(ws, cold_body("openai_responses"))) == COLD_FACTS
        plain = {"model": "gpt-5", "input": "What is in this directory?"}
        assert ws_answer(ws, plain).startswith("Noted: What is in this directory?")


# -- --log ---------------------------------------------------------------------------------------


def read_log(emulator: Emulator, log: Path) -> list[dict[str, Any]]:
    """The log's lines, once it has one per recorded request (it is written as each answer
    ends, while the emulator runs)."""
    deadline = time.monotonic() + 10
    while True:
        lines = log.read_text(encoding="utf-8").splitlines()
        if len(lines) >= len(emulator.requests) or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)


def test_the_log_has_one_line_per_request_and_never_a_credential(
    served: tuple[Emulator, str, Path],
) -> None:
    emulator, url, log = served
    hot = {**hot_body("anthropic"), "stream": True}
    post(url, PATHS["anthropic"], json.dumps(hot).encode(), headers("anthropic"))
    cold = json.dumps(cold_body("openai_chat")).encode()
    post(url, PATHS["openai_chat"], cold, headers("openai_chat"))
    plain = {"model": "gpt-5", "input": "hello"}
    post(url, PATHS["openai_responses"], json.dumps(plain).encode(), headers("openai_responses"))
    # a body that is no JSON, holding the key; a key in a URL
    post(url, PATHS["anthropic"], b'{"api_key": "' + SECRET.encode(), headers("anthropic"))
    post(url, f"/v1/models?key={SECRET}", b"{}", headers("openai_chat"))
    ws_url = "ws" + url[len("http") :] + "/v1/responses"
    with connect(ws_url, additional_headers=headers("openai_responses"), open_timeout=5) as ws:
        ws_answer(ws, hot_body("openai_responses"))
    lines = read_log(emulator, log)
    assert len(lines) == len(emulator.requests) == 7
    assert SECRET not in log.read_text(encoding="utf-8")
    fields = {"time", "transport", "method", "path", "model", "stream", "shadow", "facts"}
    assert all(set(line) == {*fields, "usage"} for line in lines)
    seen = [(x["transport"], x["method"], x["path"], x["shadow"], x["facts"]) for x in lines]
    assert seen == [
        ("http", "POST", "/v1/messages", "hot", 3),
        ("http", "POST", "/v1/chat/completions", "cold", 4),
        ("http", "POST", "/v1/responses", "none", 0),
        ("http", "POST", "/v1/messages", "none", 0),
        ("http", "POST", "/v1/models", "none", 0),
        ("websocket", "GET", "/v1/responses", "none", 0),
        ("websocket", "WEBSOCKET", "/v1/responses", "hot", 3),
    ]
    hot_line, cold_line, plain_line, bad, missing, handshake, message = lines
    assert (hot_line["model"], hot_line["stream"]) == ("claude-sonnet-4-5", True)
    assert (cold_line["model"], cold_line["stream"]) == ("claude-haiku-4-5", False)
    assert message["stream"] is True and message["model"] == "gpt-5"
    for line in (hot_line, cold_line, plain_line, message):
        usage = line["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
        assert usage["cache_read_tokens"] == usage["cache_write_tokens"] == 0
    assert bad["usage"] is missing["usage"] is handshake["usage"] is None
    assert all(isinstance(x["time"], float) for x in lines)


# -- the command ---------------------------------------------------------------------------------


def test_a_log_in_a_missing_directory_is_refused_at_start_up(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "requests.jsonl"
    result = CliRunner().invoke(cli, ["dev", "upstream", "--log", str(target)])
    assert result.exit_code == 2
    assert "--log" in result.output and "No such file or directory" in result.output
    assert not target.parent.exists()


def test_help_says_it_answers_shadow_questions_with_what_the_user_stated() -> None:
    result = CliRunner().invoke(cli, ["dev", "upstream", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "proposing what the user stated" in text and "--log FILE" in text


def test_shadow_delay_plays_a_provider_slow_to_answer_the_shadow_read_only() -> None:
    emulator = upstream_emulator(None, shadow_delay=1.0)
    with BackgroundServer(emulator) as server:
        started = time.monotonic()
        body = json.dumps(hot_body("anthropic")).encode()
        status, raw = post(server.url, PATHS["anthropic"], body, headers("anthropic"))
        slow = time.monotonic() - started
        assert status == 200 and proposed(answer_text("anthropic", json.loads(raw))) == HOT_FACTS
        started = time.monotonic()
        plain = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
        post(server.url, PATHS["openai_chat"], json.dumps(plain).encode(), headers("openai_chat"))
        fast = time.monotonic() - started
    assert slow >= 1.0 > fast
