"""A session never spans two API keys, and the key is never written anywhere.

Clients that send no session id of their own get one derived from project + model + first user
message + a salted digest of their credential: two keys whose first messages are the same used
to be merged into one session. Through the real proxy with the official SDKs."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from ember.store.accounting import exchanges
from ember.testing import Reply
from tests.conftest import Stack, StackFactory

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

CHAT: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
MSG: Any = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
#: Keys no other byte of a test run would ever hold.
SECRET_OPENAI = "sk-proj-Zq8vR3xK1mN7pL2wT9yB4cF6hJ0dS5gA"
SECRET_ANTHROPIC = "sk-ant-api03-Qw7eR9tY2uI4oP6aS8dF1gH3jK5lZ0xC"


#: Loggers of the proxy's process side: ember itself and the libraries it serves and calls with.
PROXY_LOGGERS = ("ember", "uvicorn", "aiohttp", "asyncio")


def sessions_of(stack: Stack) -> list[str]:
    stack.settle()
    return [r["session_id"] for r in exchanges(stack.home / "stats.db")]


def gpt(stack: Stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.url + "/v1", api_key=key, max_retries=0)


def test_two_keys_sending_the_same_first_message_are_two_sessions(stack: Stack) -> None:
    with gpt(stack, "sk-one") as one, gpt(stack, "sk-two") as two:
        one.chat.completions.create(**CHAT)
        two.chat.completions.create(**CHAT)
        later = [*CHAT["messages"], {"role": "assistant", "content": "hello"}]
        one.chat.completions.create(
            model="gpt-5", messages=[*later, {"role": "user", "content": "and then?"}]
        )
    # rows of a session that names no project are written together (accounting holds them
    # until the session names one), so count them rather than read their order
    counts = sorted(Counter(sessions_of(stack)).values())
    assert counts != [3], "two API keys were merged into one session"
    assert counts == [1, 2], "one key's conversation must stay one session"


def test_anthropic_keys_are_told_apart_too(stack: Stack) -> None:
    for key in ("sk-ant-one", "sk-ant-two"):
        with anthropic.Anthropic(base_url=stack.url, api_key=key, max_retries=0) as c:
            c.messages.create(**MSG)
    assert len(set(sessions_of(stack))) == 2


def test_a_session_the_client_names_keeps_its_name_across_keys(stack: Stack) -> None:
    """Decided in ember.session: a name the client chose is the session, whatever the key
    (a subscription's OAuth token refreshes within one live session)."""
    for key in ("sk-one", "sk-two"):
        with gpt(stack, key) as c:
            c.chat.completions.create(**CHAT, extra_headers={"x-ember-session-id": "shared"})
            c.responses.create(model="gpt-5", input="hi", prompt_cache_key="codex-conv-1")
    assert Counter(sessions_of(stack)) == {"shared": 2, "codex-conv-1": 2}


def _files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file()]


def test_the_key_is_never_written_to_a_database_or_a_log(
    make_stack: StackFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stack = make_stack(stages="features", shadow="primary")
    work = tmp_path / "repo"
    work.mkdir()
    project = {"x-ember-cwd": str(work)}
    stack.emulator.script(
        Reply("Noted: the build uses make."),
        Reply("Noted."),
        Reply.error(401, "invalid x-api-key"),
        Reply.failing("overloaded_error", "Overloaded"),
    )
    with (
        gpt(stack, SECRET_OPENAI) as g,
        anthropic.Anthropic(base_url=stack.url, api_key=SECRET_ANTHROPIC, max_retries=0) as c,
    ):
        ask: Any = [{"role": "user", "content": "remember: the build uses make"}]
        g.chat.completions.create(model="gpt-5", messages=ask, extra_headers=project)
        c.messages.create(**{**MSG, "messages": ask}, extra_headers=project)
        with pytest.raises(anthropic.AuthenticationError):
            c.messages.create(**MSG, extra_headers=project)
        with pytest.raises(openai.APIError):
            list(g.chat.completions.create(**CHAT, stream=True, extra_headers=project))
    # shadow memory reads the quiet sessions with the client's key: give it a bounded moment
    deadline = time.monotonic() + 5.0
    while len(stack.emulator.requests) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    stack.settle()
    files = _files(stack.home)
    assert any(p.name == "ember.db" for p in files), "the project's database was written"
    for path in files:
        data = path.read_bytes()
        for secret in (SECRET_OPENAI, SECRET_ANTHROPIC):
            assert secret.encode() not in data, f"{path.relative_to(stack.home)} holds the key"
    # what the proxy's side logged (the test's own SDK clients log their requests too)
    proxy_side = [r for r in caplog.records if r.name.split(".")[0] in PROXY_LOGGERS]
    assert any(r.name.startswith("ember.") for r in proxy_side), "nothing logged to check"
    logged = "".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in proxy_side)
    for secret in (SECRET_OPENAI, SECRET_ANTHROPIC):
        assert secret not in logged
        assert secret[-12:] not in logged  # nor a recognisable piece of it
