"""At most `limit` asks search memory at once; the others go on without, and are counted."""

from __future__ import annotations

import logging

import pytest

from ember.memory.gate import AskGate


def test_asks_past_the_limit_go_on_without_and_are_counted() -> None:
    gate = AskGate(2)
    assert gate.enter() and gate.enter()
    assert not gate.enter() and not gate.enter()
    assert gate.turned_away == 2
    gate.leave()
    assert gate.enter()  # a slot came free
    assert gate.turned_away == 2


def test_the_log_says_it_once_a_minute_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    gate = AskGate(1, clock=lambda: now[0])
    assert gate.enter()
    with caplog.at_level(logging.WARNING, logger="ember.memory.gate"):
        for _ in range(5):
            gate.enter()
        now[0] = 61.0
        gate.enter()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("memory: 1 ask(s)") and lines[1].startswith("memory: 5 ask(s)")


def test_a_limit_below_one_is_one() -> None:
    assert AskGate(0).limit == 1
