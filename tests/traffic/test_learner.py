"""Accumulation and decay: noise is not saved, memory stays bounded, stale lessons go."""

from __future__ import annotations

from ember.memory.models import Evidence
from ember.traffic.learner import DAY, TrafficLearner, recoveries_to_drop, recovery_weight
from ember.traffic.patterns import Category, Observation


def obs(key: str, mid: str) -> Observation:
    return Observation(
        Category.ENVIRONMENT, key, f"fact {key}", (Evidence("tool-verified", message_id=mid),)
    )


def test_a_fact_is_handed_out_once_after_enough_sightings_with_all_their_evidence() -> None:
    learner = TrafficLearner()
    assert learner.add("p", obs("k", "m1")) is None  # seen once: maybe noise
    fact = learner.add("p", obs("k", "m2"))
    assert fact is not None
    assert [p.message_id for p in fact.evidence] == ["m1", "m2"]
    assert learner.add("p", obs("k", "m3")) is None  # saved already: only counted
    assert learner.sightings("p", "k") == 3


def test_projects_never_share_a_lesson() -> None:
    learner = TrafficLearner()
    learner.add("p1", obs("k", "m1"))
    assert learner.add("p2", obs("k", "m2")) is None


def test_pending_sightings_are_bounded_dropping_the_oldest() -> None:
    learner = TrafficLearner(max_pending=10)
    for i in range(1_000):
        learner.add("p", obs(f"noise-{i}", "m"))
    assert len(learner) == 10
    assert learner.sightings("p", "noise-0") == 0
    assert learner.sightings("p", "noise-999") == 1


def test_a_fact_that_could_not_be_saved_can_be_learned_again() -> None:
    learner = TrafficLearner()
    learner.add("p", obs("k", "m1"))
    assert learner.add("p", obs("k", "m2")) is not None
    learner.forget("p", "k")
    learner.add("p", obs("k", "m3"))
    assert learner.add("p", obs("k", "m4")) is not None


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
