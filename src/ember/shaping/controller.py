"""The AIMD verbosity controller: a pure state machine over user signals.

Borrowed from congestion control, with the asymmetry on purpose:

- ``TOO_LITTLE`` (the user asked for more detail) drops one level at once and starts a
  cooldown: annoying a user is the expensive event, so react fast, then hold still.
- ``TOO_MUCH`` (an interrupted answer, a reply faster than the answer could be read) raises a
  level only after ``UP_STREAK`` of them in a row and never during a cooldown: probe toward
  terse slowly, so a wrong step costs little.
- ``NEUTRAL`` (a new ask with neither) resets the streak: the pressure must be consecutive.

Every observation is one user turn and counts the cooldown down. The controller never
raises itself to ``MAX_AUTO_LEVEL`` + 1 (level 4 is for users who ask for it explicitly).
How signals are detected lives in ``signals``; when a new level reaches a session lives in
the stage (only at a session boundary or once its cache is cold) -- neither is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

UP_STREAK = 3
COOLDOWN_TURNS = 5
MIN_AUTO_LEVEL = 0
MAX_AUTO_LEVEL = 3


class Signal(StrEnum):
    TOO_LITTLE = "too_little"
    TOO_MUCH = "too_much"
    NEUTRAL = "neutral"


@dataclass(frozen=True)
class ControllerState:
    level: int
    up_streak: int = 0
    cooldown: int = 0
    observations: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "up_streak": self.up_streak,
            "cooldown": self.cooldown,
            "observations": self.observations,
        }

    @classmethod
    def from_json(cls, data: Any) -> ControllerState | None:
        """The state in ``data``, or None when it is not a valid state (a hand-edited or
        truncated file must not put a level outside the controller's range in force)."""
        if not isinstance(data, dict):
            return None
        values: list[int] = []
        for key in ("level", "up_streak", "cooldown", "observations"):
            v = data.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                return None
            values.append(v)
        if not MIN_AUTO_LEVEL <= values[0] <= MAX_AUTO_LEVEL:
            return None
        return cls(*values)


def observe(state: ControllerState, signal: Signal) -> ControllerState:
    """The state after one user turn with ``signal``."""
    cooldown = max(state.cooldown - 1, 0)
    seen = state.observations + 1
    if signal == Signal.TOO_LITTLE:
        level = max(state.level - 1, MIN_AUTO_LEVEL)
        return ControllerState(level, 0, COOLDOWN_TURNS, seen)
    if signal == Signal.NEUTRAL:
        return ControllerState(state.level, 0, cooldown, seen)
    streak = state.up_streak + 1
    if streak >= UP_STREAK and state.cooldown == 0 and state.level < MAX_AUTO_LEVEL:
        return ControllerState(state.level + 1, 0, cooldown, seen)
    return replace(state, up_streak=streak, cooldown=cooldown, observations=seen)
