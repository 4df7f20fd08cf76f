"""The AIMD controller: fast down on too little, slow up on too much, cooldown."""

from __future__ import annotations

from ember.shaping.controller import (
    COOLDOWN_TURNS,
    ControllerState,
    Signal,
    observe,
)

MUCH, LITTLE, NEUTRAL = Signal.TOO_MUCH, Signal.TOO_LITTLE, Signal.NEUTRAL


def run(state: ControllerState, *signals: Signal) -> ControllerState:
    for s in signals:
        state = observe(state, s)
    return state


def test_too_little_drops_a_level_at_once_and_starts_a_cooldown() -> None:
    s = observe(ControllerState(2), LITTLE)
    assert (s.level, s.cooldown, s.up_streak) == (1, COOLDOWN_TURNS, 0)


def test_too_much_raises_only_after_three_in_a_row() -> None:
    s = run(ControllerState(2), MUCH, MUCH)
    assert s.level == 2 and s.up_streak == 2
    s = observe(s, MUCH)
    assert (s.level, s.up_streak) == (3, 0)


def test_a_neutral_turn_resets_the_streak() -> None:
    s = run(ControllerState(2), MUCH, MUCH, NEUTRAL, MUCH, MUCH)
    assert s.level == 2


def test_no_raise_during_the_cooldown() -> None:
    s = run(ControllerState(2), LITTLE)  # level 1, cooldown 5
    s = run(s, MUCH, MUCH, MUCH)  # would raise, but cooling down
    assert s.level == 1 and s.cooldown == COOLDOWN_TURNS - 3
    s = run(s, NEUTRAL, NEUTRAL)  # cooldown over
    assert s.cooldown == 0
    s = run(s, MUCH, MUCH, MUCH)
    assert s.level == 2


def test_bounds_zero_and_three() -> None:
    assert run(ControllerState(0), LITTLE).level == 0
    assert run(ControllerState(3), MUCH, MUCH, MUCH, MUCH, MUCH, MUCH).level == 3


def test_state_round_trips_and_rejects_bad_files() -> None:
    s = run(ControllerState(2), LITTLE, MUCH)
    assert ControllerState.from_json(s.to_json()) == s
    assert (
        ControllerState.from_json({"level": 9, "up_streak": 0, "cooldown": 0, "observations": 1})
        is None
    )
    assert ControllerState.from_json({"level": "2"}) is None
    assert ControllerState.from_json([1, 2]) is None
