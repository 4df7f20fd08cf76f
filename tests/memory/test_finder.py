"""The search pipeline: an ask that names a time finds what was said then."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ember.memory import HierarchicalMemory, NewMemory
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.retrieval.rank import Ranking
from tests.memory.conftest import Clock, OpenStore

DAY = 86400.0
#: Noon UTC, so the day is the same in every zone a test machine may run in.
HALLOWEEN = datetime(2018, 10, 31, 12, 0, tzinfo=UTC).timestamp()
ASK = "which film did we watch on Halloween?"


def _film_club(store: HierarchicalMemory) -> str:
    """Sixty strong keyword matches on other days, and the answer: a turn from Halloween that
    shares only "watch" with the ask."""
    others = [
        NewMemory(f"the film club will watch film number {i} together", created_at=t)
        for i, t in enumerate(HALLOWEEN - (i + 2) * DAY for i in range(60))
    ]
    store.add_many(others, dedup=False)
    (answer,) = store.add_many(
        [NewMemory("we watched A Quiet Place, so scary", created_at=HALLOWEEN)], dedup=False
    )
    return answer.id


def test_an_ask_naming_a_day_finds_the_turn_from_that_day(
    open_store: OpenStore, clock: Clock
) -> None:
    clock.now = HALLOWEEN + 15 * DAY
    store = open_store()
    answer = _film_club(store)
    timeless = [h.memory.id for h in store.search(ASK, top_k=5, fusion=Ranking(), touch=False)]
    assert answer not in timeless  # buried under sixty better keyword matches
    hits = store.search(ASK, top_k=5, fusion=Ranking(time_weight=0.5), touch=False)
    assert hits[0].memory.id == answer
    assert hits[0].timing == 1.0
    assert all(h.timing < 1.0 for h in hits[1:])


def test_time_aware_search_is_deterministic(open_store: OpenStore, clock: Clock) -> None:
    clock.now = HALLOWEEN + 15 * DAY
    store = open_store()
    _film_club(store)
    ranking = Ranking(time_weight=0.5)
    runs = [store.search(ASK, top_k=10, fusion=ranking, touch=False) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


def test_a_date_in_context_is_not_the_ask_naming_a_time(
    open_store: OpenStore, clock: Clock
) -> None:
    """Only the user's own words set the window: a log line's date pasted as a tool output
    must not pull the search towards that day."""
    clock.now = HALLOWEEN + 15 * DAY
    store = open_store()
    _film_club(store)
    q = MemoryQuery("which film did we watch?", tool_outputs=("2018-10-31 12:00 build ok",))
    hits = store.search(q, top_k=5, fusion=Ranking(time_weight=0.5), touch=False)
    assert all(h.timing == 1.0 for h in hits)


def _chat(store: HierarchicalMemory, category: str | None) -> dict[str, str]:
    """Two conversations interleaved in time, and filler that matches the ask better than
    the answer does."""
    t = HALLOWEEN
    lines = [
        ("a", "what time does the chat party start?", t),
        ("b", "is the soccer game tonight?", t + 30),
        ("a", "at 7 tonight, bring snacks", t + 60),
        ("b", "no, it moved to Sunday", t + 90),
    ]
    lines += [
        ("c", f"party planning note {i}: start with time for games", t + 200 + i) for i in range(30)
    ]
    made = store.add_many(
        [NewMemory(text, created_at=at, session_id=s, category=category) for s, text, at in lines],
        dedup=False,
    )
    return {m.content: m.id for m in made}


def test_the_reply_to_a_matched_turn_ranks_right_below_it(
    open_store: OpenStore, clock: Clock
) -> None:
    clock.now = HALLOWEEN + DAY
    store = open_store()
    ids = _chat(store, "turn")
    hits = store.search("what time does the chat party start?", top_k=3, touch=False)
    assert [h.memory.id for h in hits[:2]] == [
        ids["what time does the chat party start?"],
        ids["at 7 tonight, bring snacks"],  # the next turn of session a, not of session b
    ]
    assert hits[1].score == pytest.approx(0.7 * hits[0].score, abs=1e-6)
    off = store.search(
        "what time does the chat party start?",
        top_k=3,
        fusion=Ranking(reply_weight=0.0),
        touch=False,
    )
    assert ids["at 7 tonight, bring snacks"] not in [h.memory.id for h in off]


def test_facts_are_not_replies_to_each_other(open_store: OpenStore, clock: Clock) -> None:
    """Only conversation turns (``import --turns``) have replies: two facts saved one after
    the other in a session say nothing about each other."""
    clock.now = HALLOWEEN + DAY
    store = open_store()
    ids = _chat(store, None)
    hits = store.search("what time does the chat party start?", top_k=3, touch=False)
    assert ids["at 7 tonight, bring snacks"] not in [h.memory.id for h in hits]


def test_a_window_spread_over_the_whole_store_ranks_no_keyword_candidates_in_it(
    open_store: OpenStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 inside a window runs over its seq range: when an import out of time order makes
    that range wider than ``WINDOW_SPAN``, the window gives only its nearest memories (an
    unbounded BM25 over the store is what the postings budget exists to avoid)."""
    from ember.memory import search
    from ember.memory.index.fts import FtsIndex

    clock.now = HALLOWEEN + 15 * DAY
    store = open_store()
    # Imported first, dated Halloween: the window's seqs now span the whole store.
    store.add_many([NewMemory("pumpkin carving tonight", created_at=HALLOWEEN)], dedup=False)
    answer = _film_club(store)
    ranges: list[tuple[int, int]] = []
    original = FtsIndex.rank

    def spy(self, conn, terms, k, between=None):  # type: ignore[no-untyped-def]
        if between is not None:
            ranges.append(between)
        return original(self, conn, terms, k, between)

    monkeypatch.setattr(FtsIndex, "rank", spy)
    ranking = Ranking(time_weight=0.5)
    assert store.search(ASK, top_k=1, fusion=ranking, touch=False)[0].memory.id == answer
    assert len(ranges) == 1
    assert ranges[0][1] - ranges[0][0] > 50
    monkeypatch.setattr(search, "WINDOW_SPAN", 50)
    assert store.search(ASK, top_k=1, fusion=ranking, touch=False)[0].memory.id == answer
    assert len(ranges) == 1  # not asked again: the nearest memories still found the answer


def test_a_greeting_naming_the_person_does_not_bury_what_they_said(
    open_store: OpenStore, clock: Clock
) -> None:
    """Real chats are full of turns like "ADAM!!!": they share the ask's one rare word (the
    name) and nothing else, and outranked the turn holding the answer."""
    clock.now = HALLOWEEN + DAY
    store = open_store()
    answer = "my mom had cancer but she is fine now"
    turns = ["ADAM!!!", "Adam! / Hi there", "hey ADAM", answer, "we should get pizza later"]
    made = store.add_many(
        [NewMemory(t, created_at=HALLOWEEN + i, session_id="a", category="turn")
         for i, t in enumerate(turns)], dedup=False,
    )  # fmt: skip
    ids = {m.content: m.id for m in made}
    ask = "how is Adam's mom doing after her illness?"
    hits = store.search(ask, top_k=3, touch=False)
    assert hits[0].memory.id == ids[answer]
    off = store.search(ask, top_k=3, fusion=Ranking(short_turn_terms=0), touch=False)
    assert ids[answer] not in [h.memory.id for h in off]  # three greetings first
    scaled = {h.memory.id: h.score for h in hits}
    whole = {h.memory.id: h.score for h in off}
    assert scaled[ids["ADAM!!!"]] == pytest.approx(0.5 * whole[ids["ADAM!!!"]], abs=1e-6)


def test_an_answer_two_turns_on_is_a_reply_too(open_store: OpenStore, clock: Clock) -> None:
    """In a chat the answer sometimes comes after a follow-up: with ``reply_depth=2`` the
    second turn after a matched one joins the candidates too, the third does not; as shipped
    (1) only the next turn does."""
    clock.now = HALLOWEEN + DAY
    store = open_store()
    lines = ["how long does your mom work?", "yeah. makes sense", "until 7 am, night nurse",
             "cool cool", "what about your dad"]  # fmt: skip
    lines += [f"my mom and I talk about work on day {i}" for i in range(30)]
    made = store.add_many(
        [NewMemory(t, created_at=HALLOWEEN + i, session_id="a" if i < 5 else "b",
                   category="turn") for i, t in enumerate(lines)], dedup=False,
    )  # fmt: skip
    ids = {m.content: m.id for m in made}
    ask = "how long does your mom work?"
    two = Ranking(reply_depth=2)
    found = [h.memory.id for h in store.search(ask, top_k=5, fusion=two, touch=False)]
    assert found[0] == ids[ask]
    assert ids["until 7 am, night nurse"] in found
    assert ids["cool cool"] not in found  # the third turn on is not a reply
    one = store.search(ask, top_k=5, touch=False)
    assert ids["until 7 am, night nurse"] not in [h.memory.id for h in one]


def test_a_reply_depth_under_one_is_refused() -> None:
    with pytest.raises(ValueError, match="reply_depth"):
        Ranking(reply_depth=0)
