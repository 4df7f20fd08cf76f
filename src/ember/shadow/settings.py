"""Shadow memory's settings: a flat section (``ember.sections``), so the keys keep the names
README's Configuration table gives them (``shadow``, ``EMBER_SHADOW_IDLE_SECONDS``...), and are
also written grouped (``[shadow] idle_seconds``, ``EMBER_SHADOW__IDLE_SECONDS``). The proxy and
``ember wrap``'s launcher, which import no feature, read the two stopping times through
``Settings.shadow_stop_seconds`` and ``Settings.shadow_finish_seconds``."""

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
    #: The shadow's budget (ember/shadow/spend_share.py): over the last 7 days, a project's shadow
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
    #: A stopping proxy (``ember wrap``'s client exited, Ctrl-C, SIGTERM) gives unread sessions
    #: this long to be read while the provider's cache is hot; a second Ctrl-C skips it. 0: off.
    shadow_stop_seconds: float = Field(default=5.0, ge=0.0, le=60.0)
    #: The proxy ``ember wrap`` started, once the last wrap using it exits, keeps serving
    #: while it finishes reading its sessions for up to this long, then stops by itself: a
    #: provider that takes longer than ``shadow_stop_seconds`` to answer no longer loses the
    #: read (the wrap returns at once and says so). 0: stop at once, as a proxy stopped by a
    #: signal does. 120: a slow provider's answer, a few times over.
    shadow_finish_seconds: float = Field(default=120.0, ge=0.0, le=3600.0)
