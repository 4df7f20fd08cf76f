"""Why a hit scored what it did: the breakdown ``ember memory search --explain`` prints and the
dashboard shows, the same for both — the answer to "why was my fact not injected?"."""

from __future__ import annotations

from typing import Any

from ember.memory.models import MemoryHit


def explain_hit(h: MemoryHit, floor: float) -> dict[str, Any]:
    """The parts of the one score (cosine, keywords, time, the short-turn and reply-of
    factors) and whether it reaches the injection floor (``memory_min_score``)."""
    return {
        "cosine": h.similarity,
        "keywords": h.lexical,
        "time": h.timing,
        "short_turn": h.substance,
        "reply_of": h.reply_of,
        "floor": floor,
        "above_floor": h.score >= floor,
    }
