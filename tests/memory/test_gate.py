"""At most `limit` asks search memory at once; the others go on without, and are counted."""

from __future__ import annotations

import logging

import pytest

from ember.memory.gate import AskGate
from ember.memory.share import CpuShare


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


def test_searches_past_their_share_of_the_cpu_turn_asks_away_until_it_refills(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A flood: each search takes 0.1 s; a tenth of one core allows one a second after the
    half second of burst is spent, whatever the free slots."""
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    gate = AskGate(4, CpuShare(0.1, cores=1, burst=0.5, clock=clock), clock=clock)
    searched = 0
    with caplog.at_level(logging.WARNING, logger="ember.memory.gate"):
        for _ in range(30):  # 3 s of asks, one every 0.1 s
            if gate.enter():
                searched += 1
                gate.leave(0.1)
            now[0] += 0.1
    # 0.5 s of burst (5 searches), then 0.1 s of credit per second: ~3 more in 3 s.
    assert 7 <= searched <= 9, searched
    assert gate.turned_away == 30 - searched and gate.busy == 0
    assert "its share of the CPU (memory_cpu_share)" in caplog.records[0].getMessage()
    now[0] += 10.0  # a quiet spell refills the burst, never past it
    assert sum(1 for _ in range(8) if gate.enter() and (gate.leave(0.1) or True)) == 5


def test_asks_seconds_apart_never_meet_the_share() -> None:
    """Eight agents, each asking every 5 s, searches of 10 ms: all searched for an hour."""
    now = [0.0]
    clock = lambda: now[0]  # noqa: E731
    gate = AskGate(2, CpuShare(0.1, cores=2, clock=clock), clock=clock)
    for _ in range(3600 // 5 * 8):
        assert gate.enter()
        gate.leave(0.010)
        now[0] += 5 / 8
    assert gate.turned_away == 0
