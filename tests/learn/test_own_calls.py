"""``ember learn``'s model calls through an ember proxy are ember's own: forwarded untouched
(no verbosity block in learn's prompt) and never recorded as a client session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ember.learn.analyze import ApiBackend, CliBackend
from ember.shaping.verbosity import OPEN_TAG
from ember.store.accounting import exchanges
from ember.store.registry import stats_db_path
from tests.conftest import StackFactory

SYSTEM = "You analyse coding-agent session logs. Working directory: /home/dev/learn-here"


@pytest.mark.parametrize(("protocol", "suffix"), [("anthropic", ""), ("openai", "/v1")])
def test_learn_through_the_proxy_is_forwarded_untouched_and_not_a_session(
    make_stack: StackFactory, protocol: str, suffix: str
) -> None:
    stack = make_stack(stages="features")
    backend = ApiBackend(stack.url + suffix, "claude-sonnet-4-5", "sk-test", protocol)
    answer = backend.complete(SYSTEM, "What loops do these logs show?")
    assert answer.text
    stack.settle()
    [got] = stack.emulator.requests
    assert OPEN_TAG.encode() not in got.body and b"x-ember" not in b"".join(
        k.encode() for k, _ in got.headers
    )
    assert exchanges(stats_db_path(stack.home)) == []
    assert not list((stack.home / "projects").glob("*/ember.db"))


def test_learns_claude_cli_run_carries_the_header(tmp_path: Path) -> None:
    backend = CliBackend("claude", env={"ANTHROPIC_CUSTOM_HEADERS": "x-team: blue"})
    env = backend._env()
    assert env is not None
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "x-team: blue\nx-ember-bypass: 1"
    assert CliBackend("codex", env={"A": "b"})._env() == {"A": "b"}
    assert "PATH" in (CliBackend("claude")._env() or {}) or "PATH" not in os.environ
