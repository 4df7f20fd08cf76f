"""Shadow memory's settings: a flat section (``ember.sections``), so the keys keep the names
README's Configuration table gives them (``shadow``, ``EMBER_SHADOW_IDLE_SECONDS``...).
``shadow_stop_seconds`` is the kernel's: how long a stopping proxy lets its stages wind down."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ShadowSettings(BaseModel):
    """What shadow memory reads (``settings.section(ShadowSettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: primary: facts are extracted from the still-hot prompt cache after a turn and become
    #: memories; compare: the shadow and the cold steward both run, into their own tables,
    #: and the steward's facts become memories (``ember shadow compare`` judges them); off.
    shadow: Literal["off", "compare", "primary"] = "primary"
    #: A session idle this long (seconds) has its unread messages extracted.
    shadow_idle_seconds: float = Field(default=60.0, gt=0)
    #: How often the shadow scheduler looks for idle sessions and expired prefixes (seconds).
    shadow_tick_seconds: float = Field(default=15.0, gt=0)
    #: The shadow's budget (ember/shadow/budget.py): over the last 7 days, a project's shadow
    #: (and steward) calls may spend this share of what its clients spent, plus the allowance.
    shadow_max_share: float = Field(default=0.15, ge=0.0, le=1.0)
    #: Spend each project may have on top of the share over 7 days, in weighted tokens (a
    #: fresh input token counts 1, a cache read 0.1): a new project's first sessions are read
    #: before its own spend builds up a share. Priced at the run's model when it has a price.
    shadow_allowance_tokens: int = Field(default=20_000, ge=0)
    #: The cold path's model (reads rendered backlog pages); unset: the provider's light
    #: model (claude-haiku-4-5 for Anthropic sessions, gpt-5-mini for OpenAI ones).
    light_model: str | None = None
    #: A key for the light model when no session's credentials are in memory (after a
    #: restart). Read from the environment or the file, never written anywhere by ember.
    light_api_key: str | None = Field(default=None, repr=False)
