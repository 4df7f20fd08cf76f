"""Choosing the injection floor from measured scores (pure).

A floor on ``MemoryHit.score`` trades two failures: a relevant memory left out of the prompt
(the agent re-discovers what it was told) and an irrelevant one injected (tokens spent, and a
stale note read as context). ``choose_floor`` takes the scores of relevant hits and of hits for
asks the store cannot answer, and returns the highest floor that drops at most ``max_dropped``
of the relevant ones, with both shares, so the trade is stated rather than guessed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The share of relevant hits the shipped floor may drop (on the dev splits). The keyword part
#: of the score is a share of the ask's terms (``lexical.py``), the same in a store of any
#: size, so a floor set on the ~1,600-memory dev stores holds in a young project's small one
#: (it did not while that part was BM25: 1% then let 26% of irrelevant hits through).
MAX_DROPPED = 0.02


@dataclass(frozen=True)
class FloorChoice:
    floor: float
    relevant_dropped: float  # share of relevant scores below the floor
    irrelevant_kept: float  # share of irrelevant scores at or above it


def shares(relevant: Sequence[float], irrelevant: Sequence[float], floor: float) -> FloorChoice:
    dropped = sum(1 for s in relevant if s < floor) / len(relevant) if relevant else 0.0
    kept = sum(1 for s in irrelevant if s >= floor) / len(irrelevant) if irrelevant else 0.0
    return FloorChoice(floor, dropped, kept)


def choose_floor(
    relevant: Sequence[float],
    irrelevant: Sequence[float],
    max_dropped: float = MAX_DROPPED,
    step: float = 0.01,
) -> FloorChoice:
    """The highest floor (a multiple of ``step``) dropping at most ``max_dropped`` of
    ``relevant``; ``ValueError`` without relevant scores (nothing to calibrate on)."""
    if not relevant:
        raise ValueError("no relevant scores to calibrate the floor on")
    allowed = math.floor(max_dropped * len(relevant))
    ordered = sorted(relevant)
    # Dropping the ``allowed`` lowest is fine; the next one must stay.
    limit = ordered[min(allowed, len(ordered) - 1)]
    floor = math.floor(round(limit / step, 9)) * step
    return shares(relevant, irrelevant, round(floor, 6))
