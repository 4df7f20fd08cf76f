"""Output shaping's settings: a flat section (``ember.sections``), so the keys keep the names
README's Configuration table gives them (``output_holdout``, ``EMBER_OUTPUT_HOLDOUT``...)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ShapingSettings(BaseModel):
    """What output shaping reads (``settings.section(ShapingSettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Master switch. Off: requests go out untouched and their output feeds the baseline
    #: that "estimated" savings are measured against.
    output_shaping: bool = True
    #: Fraction of sessions (by hash of the session id) left unshaped as a control arm, so
    #: savings can be *measured*; e.g. 0.1.
    output_holdout: float = Field(default=0.0, ge=0.0, le=1.0)
    #: Pin the verbosity level (0 = no steering block ... 4 = minimal); unset = controller,
    #: learned level or 2.
    verbosity_level: int | None = Field(default=None, ge=0, le=4)
    #: Let the AIMD controller move the level from interrupts, fast skips, asks for detail.
    output_autotune: bool = True
    #: Lower effort fields the client sent on mechanical (tool-result) turns.
    output_effort_routing: bool = True
    #: The effort a mechanical turn is lowered to (Anthropic's floor is "low").
    output_mechanical_effort: Literal["minimal", "low", "medium", "high"] = "low"
    #: Also clamp a legacy thinking.budget_tokens to 1024 on mechanical turns. Off: the
    #: budget is part of the cache key, and even the cache-safe rule used when on (start only
    #: on a cold cache, hold over the tool run) re-writes the history once when the run ends.
    output_thinking_clamp: bool = False
