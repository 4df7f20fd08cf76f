"""Which memories an export keeps (pure): ranked, deduplicated, cut to a token budget.

Score = importance x recency x access. Recency decays with a ~10-day scale
(``exp(-age_days / 10)``): the files are re-read by every session, so what is fresh matters
more there than in a search. Access is ``1 + ln(1 + access_count)``: a fact that kept being
retrieved earns its place, with diminishing returns so one hot memory cannot crowd out the
rest. Identical facts (same content hash, e.g. a fact and its user-wide copy) appear once.
Ties are broken by id, so the same store exports the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ember.memory.models import Memory
from ember.tokens import count_tokens

DECAY_DAYS = 10.0


def export_score(m: Memory, now: float) -> float:
    age_days = max(0.0, now - m.created_at) / 86400.0
    return m.importance * math.exp(-age_days / DECAY_DAYS) * (1.0 + math.log1p(m.access_count))


def select(
    memories: Sequence[Memory],
    now: float,
    budget_tokens: int,
    line: Callable[[Memory], str],
) -> list[Memory]:
    """Current memories by score, one per content hash, while their lines fit the budget."""
    ranked = sorted(
        (m for m in memories if m.is_current),
        key=lambda m: (-round(export_score(m, now), 12), m.id),
    )
    seen: set[str] = set()
    out: list[Memory] = []
    used = 0
    for m in ranked:
        if m.content_hash in seen:
            continue
        cost = count_tokens(line(m)) + 1
        if used + cost > budget_tokens:
            break
        seen.add(m.content_hash)
        out.append(m)
        used += cost
    return out
