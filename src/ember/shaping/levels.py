"""Which verbosity level a new session gets, and why (pure).

Precedence, first present wins, and the answer says which one it was:

1. ``env`` -- ``EMBER_VERBOSITY_LEVEL`` (or ``verbosity_level`` in the config file): the user
   said so; nothing learned may override an explicit choice;
2. ``controller`` -- the AIMD controller's state, once it has observed a user turn (only with
   ``EMBER_OUTPUT_AUTOTUNE`` on);
3. ``learned`` -- the ``level`` of the ``verbosity`` document (``ember learn --verbosity``);
4. ``default`` -- level 2.

The resolved level reaches a session only when it starts or once its cache is cold; the
stage, not this function, enforces that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ember.shaping.verbosity import DEFAULT_LEVEL, MAX_LEVEL, MIN_LEVEL

LevelSource = Literal["env", "controller", "learned", "default"]


@dataclass(frozen=True)
class ResolvedLevel:
    level: int
    source: LevelSource


def _valid(level: int | None) -> bool:
    return level is not None and MIN_LEVEL <= level <= MAX_LEVEL


def resolve_level(
    override: int | None,
    controller: int | None,
    learned: int | None,
    default: int = DEFAULT_LEVEL,
) -> ResolvedLevel:
    """The level in force for a new session; out-of-range values fall through (a learned file
    written by a newer version with a level 5 must not crash or be clamped into effect)."""
    if _valid(override):
        assert override is not None
        return ResolvedLevel(override, "env")
    if _valid(controller):
        assert controller is not None
        return ResolvedLevel(controller, "controller")
    if _valid(learned):
        assert learned is not None
        return ResolvedLevel(learned, "learned")
    return ResolvedLevel(default, "default")
