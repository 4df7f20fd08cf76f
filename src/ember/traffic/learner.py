"""Accumulation: an observation becomes a fact only after enough sightings, in bounded memory.

A lesson seen once may be noise (a typo the agent fixed); so the first sightings are only
counted, and the fact is handed out for saving once, when its count reaches the category's
threshold. Sightings after that only raise its count. Both tables are bounded (least recently
seen dropped first), so a long-running proxy fed endless one-off noise stays the same size.

Recoveries go stale faster than what a project looks like: their weight halves every 5 days,
none older than 21 days is kept and at most 15 are kept at once (``recoveries_to_drop``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ember.bounded import Bounded
from ember.memory.models import Evidence
from ember.traffic.patterns import Category, Observation

#: Sightings before a fact is saved, per category.
MIN_EVIDENCE: Mapping[Category, int] = {
    Category.ERROR_RECOVERY: 2,
    Category.ENVIRONMENT: 2,
    Category.PREFERENCE: 2,
    Category.ARCHITECTURE: 2,
}
MAX_PENDING = 2_000
MAX_SAVED = 10_000
MAX_POINTERS = 5
RECOVERY_HALF_LIFE_DAYS = 5.0
RECOVERY_MAX_AGE_DAYS = 21.0
MAX_RECOVERIES = 15
DAY = 86_400.0


@dataclass
class Pending:
    observation: Observation
    count: int = 1
    evidence: list[Evidence] = field(default_factory=list)


class TrafficLearner:
    """Per process; keys are scoped by project so two projects never share a lesson."""

    def __init__(
        self,
        min_evidence: Mapping[Category, int] = MIN_EVIDENCE,
        max_pending: int = MAX_PENDING,
        max_saved: int = MAX_SAVED,
    ) -> None:
        self.min_evidence = min_evidence
        self._pending: Bounded[tuple[str, str], Pending] = Bounded(max_pending)
        self._saved: Bounded[tuple[str, str], int] = Bounded(max_saved)

    def __len__(self) -> int:
        return len(self._pending)

    def sightings(self, project: str, key: str) -> int:
        found = self._pending.get((project, key))
        return found.count if found is not None else self._saved.get((project, key), 0)

    def add(self, project: str, obs: Observation) -> Observation | None:
        """Count a sighting; the observation with every sighting's evidence when this one
        reaches the threshold (once per lesson), else None."""
        k = (project, obs.key)
        if k in self._saved:
            self._saved.put(k, self._saved[k] + 1)
            return None
        entry = self._pending.pop(k, None) or Pending(obs, 0)
        entry.count += 1
        for p in obs.evidence:
            if p not in entry.evidence and len(entry.evidence) < MAX_POINTERS:
                entry.evidence.append(p)
        if entry.count < self.min_evidence.get(obs.category, 2):
            self._pending.put(k, entry)
            return None
        self._saved.put(k, entry.count)
        first = entry.observation
        return Observation(first.category, first.key, first.content, tuple(entry.evidence))

    def forget(self, project: str, key: str) -> None:
        """A fact that could not be saved may be learned again."""
        self._saved.pop((project, key), None)


def recovery_weight(age_seconds: float) -> float:
    """Halves every 5 days; 0 past 21 days (and never above 1 for a clock that ran back)."""
    days = max(0.0, age_seconds) / DAY
    return 0.0 if days > RECOVERY_MAX_AGE_DAYS else 0.5 ** (days / RECOVERY_HALF_LIFE_DAYS)


def recoveries_to_drop(
    created: Sequence[tuple[str, float]], now: float, keep: int = MAX_RECOVERIES
) -> list[str]:
    """Of (memory id, created_at) for the project's recovery facts, the ids to delete: too
    old, or past the ``keep`` heaviest (ties by id, so the same inputs drop the same ids)."""
    weighted = sorted(
        ((recovery_weight(now - t), i) for i, t in created), key=lambda w: (-w[0], w[1])
    )
    return [i for w, i in weighted if w == 0.0] + [i for w, i in weighted if w > 0.0][keep:]
