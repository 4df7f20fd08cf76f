"""Accumulation (pure): an observation becomes a fact only after enough sightings.

A lesson seen once may be noise (a typo the agent fixed); so the first sightings are only
counted, and the fact is handed out for saving once, when its count reaches the category's
threshold. Sightings after that only raise its count. ``sight`` is the whole rule, over plain
values: the bookkeeping lives in the project's database (``sightings``), so that a lesson seen
once in each of two sessions — each through its own short-lived proxy (``ember wrap``) —
still reaches its second sighting.

What is kept is bounded: at most ``MAX_PENDING`` lessons waiting for a sighting and
``MAX_SAVED`` saved ones per project (least recently seen dropped first), and a lesson not
seen for ``max_age`` is forgotten (a sighting that old no longer counts), so a project fed
endless one-off noise for years keeps the same few rows.

Recoveries go stale faster than what a project looks like: their weight halves every 5 days,
none older than 21 days is kept and at most 15 are kept at once (``recoveries_to_drop``); a
recovery sighting is forgotten after the same 21 days.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ember.facts import Evidence
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
#: A lesson of any other category not seen for this long is forgotten.
MAX_AGE_DAYS = 90.0
MAX_RECOVERIES = 15
DAY = 86_400.0


@dataclass(frozen=True)
class Sighting:
    """What is known of one lesson of one project: its first observation (category, key,
    the fact's words), how often it was seen, the evidence of its sightings (the first
    ``MAX_POINTERS`` distinct pointers) and whether it was handed out for saving."""

    observation: Observation
    count: int
    evidence: tuple[Evidence, ...]
    saved: bool
    first_seen: float
    last_seen: float


def max_age(category: Category | str) -> float:
    """Seconds after its last sighting that a lesson is forgotten."""
    days = RECOVERY_MAX_AGE_DAYS if category == Category.ERROR_RECOVERY else MAX_AGE_DAYS
    return days * DAY


def expired(entry: Sighting, now: float) -> bool:
    return now - entry.last_seen > max_age(entry.observation.category)


def sight(
    entry: Sighting | None,
    obs: Observation,
    now: float,
    min_evidence: Mapping[Category, int] = MIN_EVIDENCE,
) -> tuple[Sighting, Observation | None]:
    """One more sighting of ``obs`` on top of what was known (``entry``, None: nothing):
    the lesson as it stands now, and the observation with every sighting's evidence when
    this sighting reaches the threshold (once per lesson), else None.

    A lesson that expired counts as never seen (its old sighting does not help save it,
    nor does its old save mark stop it); a lesson handed out already is only counted."""
    if entry is None or expired(entry, now):
        entry = Sighting(obs, 0, (), False, now, now)
    evidence = list(entry.evidence)
    for p in obs.evidence:
        if p not in evidence and len(evidence) < MAX_POINTERS:
            evidence.append(p)
    seen = replace(
        entry,
        count=entry.count + 1,
        evidence=entry.evidence if entry.saved else tuple(evidence),
        last_seen=max(now, entry.last_seen),
    )
    if entry.saved or seen.count < min_evidence.get(obs.category, 2):
        return seen, None
    first = seen.observation
    return replace(seen, saved=True), Observation(
        first.category, first.key, first.content, seen.evidence
    )


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
