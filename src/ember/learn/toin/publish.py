"""``ember toin publish``: the TOIN table as a sorted TOML file, read once at start-up (pure).

A CLI rather than a hook in the proxy: publishing happens at a deploy boundary, never inside a
request -- learned state feeding back into requests is the coupling TOIN exists to avoid.

- **Floor**: a pattern appears only with at least ``--min-observations`` (50) observations;
  below that its rates are noise.
- **Stable**: rows sorted by ``(auth_mode, model_family, structure_hash)``, numbers rounded,
  no timestamp: publishing the same table twice gives the same bytes, and a diff of two
  publishes shows only what changed.
- **Provenance**: a fixed header says what wrote the file, from what, and not to edit it.

``advice`` per pattern: ``preserve`` when agents re-fetch outputs of that structure often
(``refetch_rate >= PRESERVE_REFETCH_RATE``: cutting them would cost a second call), else
``compressible``. Until ember compresses tool outputs, that is the whole recommendation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ember.learn.toin.keys import UNKNOWN
from ember.learn.toin.patterns import Pattern

DEFAULT_MIN_OBSERVATIONS = 50
PRESERVE_REFETCH_RATE = 0.10
FORMAT = "ember-toin-recommendations"
VERSION = 1

HEADER = """\
# TOIN recommendations, written by `ember toin publish`. Do not edit by hand: publish again.
# Source: the statistics ember's proxy observed of tool outputs (structure hashes, counts,
# rates; never the outputs themselves), one row per (auth_mode, model_family,
# structure_hash) with at least `min_observations` observations, sorted by that key.
# Read once when the proxy starts; nothing here was learned or applied inside a request.
"""


@dataclass(frozen=True)
class Published:
    text: str
    rows: int
    below_floor: int
    unknown_left_out: int


def eligible(
    patterns: Iterable[Pattern], min_observations: int, include_unknown: bool = True
) -> tuple[list[Pattern], int, int]:
    """(rows to publish sorted by key, patterns below the floor, unknown-slice rows left out)."""
    rows: list[Pattern] = []
    below = unknown = 0
    for p in patterns:
        if p.observations < min_observations:
            below += 1
        elif not include_unknown and UNKNOWN in (p.key.auth_mode, p.key.model_family):
            unknown += 1
        else:
            rows.append(p)
    rows.sort(key=lambda p: (p.key.auth_mode, p.key.model_family, p.key.structure_hash))
    return rows, below, unknown


def _s(value: str) -> str:
    return json.dumps(value, ensure_ascii=True)  # a JSON ASCII string is a TOML basic string


def _row(p: Pattern) -> list[str]:
    advice = "preserve" if p.refetch_rate >= PRESERVE_REFETCH_RATE else "compressible"
    return [
        "",
        "[[pattern]]",
        f"auth_mode = {_s(p.key.auth_mode)}",
        f"model_family = {_s(p.key.model_family)}",
        f"structure_hash = {_s(p.key.structure_hash)}",
        f"kind = {_s(p.kind)}",
        f"observations = {p.observations}",
        f"users = {p.user_count}",
        f"confidence = {p.confidence:.4f}",
        f"refetch_rate = {p.refetch_rate:.4f}",
        f"error_rate = {p.error_rate:.4f}",
        f"mean_bytes = {round(p.size.mean)}",
        f"advice = {_s(advice)}",
    ]


def render(
    patterns: Sequence[Pattern], min_observations: int, include_unknown: bool = True
) -> Published:
    """The TOML text for ``patterns``."""
    if min_observations < 1:
        raise ValueError("--min-observations must be at least 1")
    rows, below, unknown = eligible(patterns, min_observations, include_unknown)
    lines = [
        HEADER.rstrip("\n"),
        "",
        "[meta]",
        f"format = {_s(FORMAT)}",
        f"version = {VERSION}",
        f"min_observations = {min_observations}",
        f"patterns = {len(rows)}",
    ]
    for p in rows:
        lines += _row(p)
    return Published("\n".join(lines) + "\n", len(rows), below, unknown)
