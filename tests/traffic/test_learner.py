"""Accumulation and decay: noise is not saved, lessons expire, stale recoveries go."""

from __future__ import annotations

from ember.memory.models import Evidence
from ember.traffic.learner import (
    DAY,
    MAX_POINTERS,
    Sighting,
    recoveries_to_drop,
    recovery_weight,
    sight,
)
from ember.traffic.patterns import Category, Observation


def obs(key: str, mid: str, category: Category = Category.ENVIRONMENT) -> Observation:
    return Observation(category, key, f"fact {key}", (Evidence("tool-verified", message_id=mid),))


def sightings(*observations: Observation, now: float = 0.0) -> list[Observation | None]:
    entry: Sighting | None = None
    out = []
    for o in observations:
        entry, fact = sight(entry, o, now)
        out.append(fact)
    return out


def test_a_fact_is_handed_out_once_after_enough_sightings_with_all_their_evidence() -> None:
    first, second, third = sightings(obs("k", "m1"), obs("k", "m2"), obs("k", "m3"))
    assert first is None  # seen once: maybe noise
    assert second is not None
    assert [p.message_id for p in second.evidence] == ["m1", "m2"]
    assert third is None  # saved already: only counted


def test_a_saved_lesson_is_only_counted() -> None:
    entry, _ = sight(None, obs("k", "m1"), 0.0)
    entry, fact = sight(entry, obs("k", "m2"), 1.0)
    assert fact is not None and entry.saved
    entry, fact = sight(entry, obs("k", "m3"), 2.0)
    assert fact is None and entry.count == 3 and entry.saved


def test_the_fact_keeps_the_words_of_its_first_sighting_and_a_few_pointers() -> None:
    entry: Sighting | None = None
    for i in range(MAX_POINTERS + 3):
        entry, _ = sight(
            entry,
            Observation(Category.ENVIRONMENT, "k", f"words {i}", obs("k", f"m{i}").evidence),
            float(i),
            {Category.ENVIRONMENT: 100},
        )
    assert entry is not None
    assert entry.observation.content == "words 0"
    assert len(entry.evidence) == MAX_POINTERS


def test_a_sighting_too_old_no_longer_counts() -> None:
    entry, _ = sight(None, obs("r", "m1", Category.ERROR_RECOVERY), 0.0)
    entry, fact = sight(entry, obs("r", "m2", Category.ERROR_RECOVERY), 22 * DAY)
    assert fact is None and entry.count == 1  # a recovery seen 22 days ago is forgotten
    entry, _ = sight(None, obs("e", "m1"), 0.0)
    entry, fact = sight(entry, obs("e", "m2"), 22 * DAY)
    assert fact is not None  # what the project looks like is kept longer


def test_a_saved_lesson_not_seen_for_long_may_be_learned_again() -> None:
    entry, _ = sight(None, obs("e", "m1"), 0.0)
    entry, _ = sight(entry, obs("e", "m2"), 0.0)
    entry, fact = sight(entry, obs("e", "m3"), 200 * DAY)
    assert fact is None and not entry.saved and entry.count == 1


def test_recovery_weight_halves_every_five_days_and_ends_after_21() -> None:
    assert recovery_weight(0) == 1.0
    assert abs(recovery_weight(5 * DAY) - 0.5) < 1e-9
    assert recovery_weight(22 * DAY) == 0.0
    assert recovery_weight(-DAY) == 1.0  # a clock that ran back never boosts


def test_at_most_fifteen_recoveries_are_kept_the_newest_first() -> None:
    now = 100 * DAY
    facts = [(f"r{i:02d}", now - i * DAY / 2) for i in range(20)]  # r00 newest
    facts.append(("old", now - 30 * DAY))
    drop = recoveries_to_drop(facts, now)
    assert drop[0] == "old"
    assert sorted(drop[1:]) == [f"r{i}" for i in range(15, 20)]
    assert recoveries_to_drop(list(reversed(facts)), now) == drop  # same inputs, same answer
