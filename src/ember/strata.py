"""Strata and holdout arms for savings accounting (pure).

A stratum uses only what is known *before* the answer exists: turn kind, an input-size bucket,
the model family, whether tools are offered. Stratifying on anything from the answer (its
length, its stop reason) would let shaping move requests between strata and bias every
comparison; and the same key has to be computable from an offline baseline.

Arms are per session, never per request: a session mixing shaped and unshaped turns both
contaminates the comparison and changes its system tail mid-way, which misses the cache.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Literal

Arm = Literal["treatment", "control"]

#: Upper bounds (exclusive) of the input-size buckets, in estimated tokens.
_BUCKETS: tuple[tuple[int, str], ...] = (
    (2_000, "<2k"),
    (8_000, "2k-8k"),
    (32_000, "8k-32k"),
    (128_000, "32k-128k"),
)
_TOP_BUCKET = ">=128k"
#: Request bytes per input token, roughly, for JSON bodies of English and code.
BYTES_PER_TOKEN = 4

_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"claude-(?:\d[\d.-]*-)?(opus|sonnet|haiku)"), r"claude-\1"),
    (re.compile(r"gpt-5"), "gpt-5"),
    (re.compile(r"gpt-4"), "gpt-4"),
    (re.compile(r"(?:^|/)o\d"), "o-series"),
    (re.compile(r"gemini"), "gemini"),
)


def input_bucket(body_bytes: int) -> str:
    """The input-size bucket of a request of ``body_bytes`` bytes."""
    tokens = body_bytes // BYTES_PER_TOKEN
    for bound, label in _BUCKETS:
        if tokens < bound:
            return label
    return _TOP_BUCKET


@functools.lru_cache(maxsize=256)
def model_family(model: str | None) -> str:
    """``claude-sonnet``, ``gpt-5``, ... with versions and dates dropped, so a point release
    does not start an empty stratum; ``other`` when unrecognised.

    Remembered per model name: it runs twice on every request, and ``Match.expand`` parses
    its template anew each time (~10 us a request)."""
    if not model:
        return "other"
    lowered = model.lower()
    for pattern, family in _FAMILIES:
        m = pattern.search(lowered)
        if m:
            return m.expand(family)
    return "other"


def stratum_key(turn_kind: str, body_bytes: int, model: str | None, has_tools: bool) -> str:
    """``kind|bucket|family|tools`` (or ``no-tools``): the label a ledger row is kept under."""
    tools = "tools" if has_tools else "no-tools"
    return f"{turn_kind}|{input_bucket(body_bytes)}|{model_family(model)}|{tools}"


def parse_stratum(label: str) -> tuple[str, str, str, str]:
    """The four parts of a stratum label; raises ``ValueError`` on anything else."""
    parts = label.split("|")
    if len(parts) != 4:
        raise ValueError(f"not a stratum label: {label!r}")
    return parts[0], parts[1], parts[2], parts[3]


def assign_arm(session_id: str, holdout: float) -> Arm:
    """``control`` for a fraction ``holdout`` of sessions, chosen by the session id's hash.

    Deterministic (the first 8 hex digits of its sha256, as a fraction of 2**32), so every
    request of a session, in every proxy replica, lands in the same arm without shared state.
    """
    if holdout <= 0:
        return "treatment"
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:8]
    return "control" if int(digest, 16) / 0x1_0000_0000 < holdout else "treatment"
