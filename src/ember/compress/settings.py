"""Compression's settings: a flat section, so the keys are the names README gives them
(``compress``, ``EMBER_COMPRESS``, ``compress_min_chars``...)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ember.compress.policy import ToolPolicy


class CompressSettings(BaseModel):
    """What compression reads (``settings.section(CompressSettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: on: long tool outputs are shortened the first time they reach the provider; off: every
    #: request goes out as the client sent it (per request: ``x-ember-compress: off``).
    compress: Literal["on", "off"] = "on"
    #: An output shorter than this (characters) is never shortened (~1,500 tokens).
    compress_min_chars: int = Field(default=6000, ge=200)
    #: Per tool: "auto" (ember decides), "lossless" (regrouped only, nothing left out) or
    #: "off" (exact). File reads and edits are "off" whatever this says for others.
    compress_tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    #: Originals are kept this many days for ``ember_retrieve``...
    compress_keep_days: float = Field(default=30.0, gt=0)
    #: ...and at most this many megabytes of them per project (the oldest go first).
    compress_keep_mb: float = Field(default=200.0, gt=0)
