"""Fusion and recency: deterministic, and each rule doing what it claims."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.memory.retrieval.rank import (
    Candidate,
    Ranking,
    rank,
    recency_boost,
    recency_factor,
    relevance,
    substance,
    window_factor,
)
from ember.memory.retrieval.timeframe import Window

NOW = 1_790_000_000.0
DAY = 86400.0


def test_recency_is_neutral_for_unknown_and_future_times() -> None:
    assert recency_factor(None, NOW) == 1.0
    assert recency_factor(NOW + 10 * DAY, NOW) == 1.0
    assert recency_factor(NOW - 30 * DAY, NOW) == math.exp(-1)
    assert recency_factor(NOW - 1 * DAY, NOW) > recency_factor(NOW - 2 * DAY, NOW)


def test_rrf_gives_one_to_a_memory_first_in_both_lists() -> None:
    cands = [
        Candidate("a", 0.9, 12.0, NOW),
        Candidate("b", 0.5, 3.0, NOW),
        Candidate("c", 0.7, None, NOW),
    ]
    rel = relevance(cands, "rrf")
    assert rel["a"] == 1.0
    assert rel["c"] > 0 and rel["b"] > 0
    assert relevance(cands, "bm25")["c"] == 0.0
    assert relevance(cands, "vector") == {"a": 0.9, "b": 0.5, "c": 0.7}


def test_a_memory_pointing_away_from_the_query_gets_no_vector_credit() -> None:
    rel = relevance([Candidate("a", 0.4, None, NOW), Candidate("b", -0.2, None, NOW)], "rrf")
    assert rel["b"] == 0.0


def test_hybrid_lets_a_strong_keyword_match_overtake_a_weak_semantic_one() -> None:
    cands = [Candidate("sem", 0.62, None, NOW), Candidate("kw", 0.60, 9.0, NOW)]
    assert [r.key for r in rank(cands, NOW, "rrf")] == ["kw", "sem"]
    assert [r.key for r in rank(cands, NOW, "vector")] == ["sem", "kw"]


def test_recency_is_a_bounded_boost() -> None:
    old = Candidate("old", 0.9, None, NOW - 180 * DAY)
    # a fresh, clearly relevant fact beats a six-month-old strong match...
    assert (
        next(r.key for r in rank([old, Candidate("new", 0.7, None, NOW)], NOW, "vector")) == "new"
    )
    # ...but a fresh weak match does not bury it
    assert (
        next(r.key for r in rank([old, Candidate("new", 0.5, None, NOW)], NOW, "vector")) == "old"
    )
    assert recency_boost(NOW - 10_000 * DAY, NOW) >= 0.75
    assert recency_boost(NOW - 100 * DAY, NOW, weight=1.0) == recency_factor(NOW - 100 * DAY, NOW)
    assert recency_boost(NOW - 100 * DAY, NOW, weight=0.0) == 1.0


def test_ties_are_broken_by_id() -> None:
    cands = [Candidate(k, 0.5, None, NOW) for k in ("b", "c", "a")]
    assert [r.key for r in rank(cands, NOW, "vector")] == ["a", "b", "c"]


@given(
    st.lists(
        st.tuples(
            st.floats(-1, 1),
            st.one_of(st.none(), st.floats(0, 50)),
            st.floats(NOW - 400 * DAY, NOW + DAY),
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(["rrf", "mix", "vector", "bm25"]),
    st.randoms(),
)
def test_the_order_does_not_depend_on_the_order_candidates_arrive_in(
    raw: list[tuple[float, float | None, float]], fusion: str, rnd: random.Random
) -> None:
    cands = [Candidate(f"id{i:03d}", s, b, t) for i, (s, b, t) in enumerate(raw)]
    shuffled = cands[:]
    rnd.shuffle(shuffled)
    assert rank(cands, NOW, fusion) == rank(shuffled, NOW, fusion)  # type: ignore[arg-type]


HALLOWEEN = Window(NOW - 10 * DAY, NOW - 9 * DAY, "Halloween")


def test_window_factor_is_one_inside_and_bounded_below_outside() -> None:
    inside = HALLOWEEN.start + DAY / 2
    assert window_factor(inside, HALLOWEEN, 0.5) == 1.0
    morning_after = window_factor(HALLOWEEN.end + DAY / 2, HALLOWEEN, 0.5)
    week_later = window_factor(HALLOWEEN.end + 7 * DAY, HALLOWEEN, 0.5)
    a_year_before = window_factor(HALLOWEEN.start - 365 * DAY, HALLOWEEN, 0.5)
    assert 1.0 > morning_after > week_later > a_year_before >= 0.5
    assert a_year_before == pytest.approx(0.5)


def test_no_window_no_date_or_no_weight_leaves_the_score_alone() -> None:
    assert window_factor(NOW, None, 0.5) == 1.0
    assert window_factor(None, HALLOWEEN, 0.5) == 1.0
    assert window_factor(NOW, HALLOWEEN, 0.0) == 1.0


def test_an_ask_naming_no_time_ranks_exactly_as_without_the_option() -> None:
    rng = random.Random(7)
    cands = [
        Candidate(f"m{i}", rng.random(), None, NOW - rng.random() * 90 * DAY, rng.random())
        for i in range(40)
    ]
    on, off = Ranking(time_weight=0.5), Ranking(time_weight=0.0)
    assert rank(cands, NOW, on, window=None) == rank(cands, NOW, off, window=None)
    assert rank(cands, NOW, off, window=HALLOWEEN) == rank(cands, NOW, off, window=None)


def test_inside_the_named_window_beats_an_equal_match_outside_it() -> None:
    on_the_day = Candidate("b", 0.6, None, HALLOWEEN.start + 3600, 0.5)
    weeks_later = Candidate("a", 0.6, None, NOW - DAY, 0.5)
    ranked = rank([weeks_later, on_the_day], NOW, Ranking(time_weight=0.3), window=HALLOWEEN)
    assert [r.key for r in ranked] == ["b", "a"]
    assert ranked[0].timing == 1.0 and ranked[1].timing < 1.0
    assert ranked[1].score == pytest.approx(ranked[0].score * ranked[1].timing, abs=1e-8)
    # A far stronger match outside the window still wins: the factor is bounded.
    strong = Candidate("c", 0.99, None, NOW - DAY, 1.0)
    ranked = rank([strong, on_the_day], NOW, Ranking(time_weight=0.3), window=HALLOWEEN)
    assert ranked[0].key == "c"


def test_time_weight_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="time_weight"):
        Ranking(time_weight=1.5)


def test_a_reply_inherits_a_share_of_its_turns_own_score() -> None:
    question = Candidate("q", 0.8, None, NOW - 60, 1.0)
    answer = Candidate("a", 0.05, None, NOW, 0.0)  # "at 7 tonight": nothing of the ask
    other = Candidate("o", 0.5, None, NOW, 0.3)
    r = Ranking(reply_weight=0.7)
    plain = rank([question, answer, other], NOW, r)
    assert [x.key for x in plain] == ["q", "o", "a"]
    ranked = rank([question, answer, other], NOW, r, replies={"a": "q"})
    assert [x.key for x in ranked] == ["q", "a", "o"]
    assert ranked[1].score == pytest.approx(0.7 * ranked[0].score, abs=1e-9)
    assert (
        rank([question, answer, other], NOW, Ranking(reply_weight=0.0), replies={"a": "q"}) == plain
    )


def test_a_reply_keeps_its_own_score_when_that_is_higher_and_chains_do_not_carry() -> None:
    first = Candidate("1", 0.9, None, NOW, 1.0)
    second = Candidate("2", 0.85, None, NOW, 1.0)  # a strong match on its own
    third = Candidate("3", 0.0, None, NOW, 0.0)  # the reply to the reply
    r = Ranking(reply_weight=0.5)
    own = {x.key: x.score for x in rank([first, second, third], NOW, r)}
    got = {
        x.key: x.score for x in rank([first, second, third], NOW, r, replies={"2": "1", "3": "2"})
    }
    assert got["2"] == own["2"]
    assert got["3"] == pytest.approx(0.5 * own["2"])  # from 2's own score, not a chain from 1


def test_a_turn_holding_few_terms_keeps_a_root_share_and_facts_are_never_scaled() -> None:
    assert substance(1, 4) == pytest.approx(0.5)
    assert substance(3, 4) == pytest.approx(math.sqrt(0.75))
    assert substance(0, 4) == 0.0  # an emoji or "ok": nothing an ask could mean
    assert substance(4, 4) == substance(40, 4) == 1.0
    assert substance(None, 4) == 1.0  # a fact: "Uses pnpm" is whole in two words
    assert substance(1, 0) == 1.0  # switched off


def test_a_greeting_naming_the_person_falls_below_the_turn_that_answers() -> None:
    # "ADAM!!!" shares the ask's rarest word and little else; the answer holds more.
    greeting = Candidate("g", 0.45, None, NOW, 0.4, terms=1)
    answer = Candidate("a", 0.40, None, NOW, 0.3, terms=9)
    fact = Candidate("f", 0.45, None, NOW, 0.4)  # the same scores as a fact: kept whole
    ranked = rank([greeting, answer, fact], NOW, Ranking())
    assert [r.key for r in ranked] == ["f", "a", "g"]
    scores = {r.key: r.score for r in ranked}
    assert scores["g"] == pytest.approx(0.5 * scores["f"], abs=1e-9)
    off = rank([greeting, answer, fact], NOW, Ranking(short_turn_terms=0))
    assert [r.key for r in off] == ["f", "g", "a"]  # a tie with the fact, broken by id
    assert {r.key: r.score for r in off}["g"] == {r.key: r.score for r in off}["f"]


def test_a_negative_short_turn_count_is_refused() -> None:
    with pytest.raises(ValueError, match="short_turn_terms"):
        Ranking(short_turn_terms=-1)
