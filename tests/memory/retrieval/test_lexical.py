"""The keyword share: the same meaning in a store of any size, stemmed like the FTS5 index."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.memory import HierarchicalMemory, NewMemory
from ember.memory.index.fts import FtsIndex
from ember.memory.retrieval import lexical
from ember.memory.retrieval.rank import Ranking
from ember.store.database import Database
from ember.store.schema import PROJECT

NOW = 1_790_000_000.0
FACT = "The service deploys to eu-west-1 through the release workflow"
ASK = "Where is the service deployed?"


def test_stems_agree_with_the_index_so_a_term_it_finds_is_a_term_that_counts(
    tmp_path: Path,
) -> None:
    """Every word the FTS5 index matches for an ask term is one whose stem ``lexical`` counts
    as held: otherwise a keyword hit would add nothing to the score."""
    words = ["deploys", "deployed", "deploying", "naïve", "résumé", "is", "us", "configuration",
             "configured", "agent_listing_delta", "running", "ran"]  # fmt: skip
    db = Database(tmp_path / "e.db", PROJECT)
    fts = FtsIndex()
    db.write(lambda c: fts.add(c, list(range(1, len(words) + 1)), words))
    for stem, word in lexical.ask_terms([" ".join(words)]).items():
        found = {s for s, _ in db.read(lambda c, w=word: fts.search(c, [w], 50))}
        held = {i + 1 for i, text in enumerate(words) if stem in lexical.stems(text)}
        assert found == held, word
    db.close()


def test_weights_depend_on_the_share_of_memories_not_their_number() -> None:
    assert lexical.term_weight(df=1, n=100_000) == 1.0
    assert lexical.term_weight(df=100_000, n=100_000) == lexical.WEIGHT_FLOOR
    assert lexical.term_weight(df=10, n=1_000) == pytest.approx(
        lexical.term_weight(df=1_000, n=100_000), abs=0.05
    )
    # A one-memory store does not call the term its only memory holds common.
    assert lexical.term_weight(df=1, n=1) > 0.8


def test_coverage_is_the_weighted_share_of_the_ask_held() -> None:
    weights = {stem: 1.0 for stem in lexical.ask_terms(["service deployed"])}
    weights |= {stem: 0.2 for stem in lexical.ask_terms(["rollback"])}
    assert lexical.coverage(weights, lexical.stems(FACT)) == pytest.approx(2.0 / 2.2)
    assert lexical.coverage(weights, lexical.stems("nothing in common")) == 0.0
    assert lexical.coverage({}, lexical.stems(FACT)) == 0.0


def test_coverages_of_many_candidates_are_each_ones_coverage_to_the_bit() -> None:
    """The search scores all its candidates at once; a fact's share must be the very float
    ``coverage`` gives it alone, or the injected bytes could change with the pool."""
    weights = {s: w for s, w in zip(lexical.ask_terms([f"{ASK} rollback workflow region"]),
                                    (1.0, 0.2, 0.7, 0.35, 0.9, 0.45), strict=False)}  # fmt: skip
    texts = [FACT, "nothing in common", "rollback of the release workflow", "", "deploy region"]
    many = lexical.coverages(weights, [(str(i), t) for i, t in enumerate(texts)])
    assert [many[str(i)] for i in range(len(texts))] == [
        lexical.coverage(weights, lexical.stems(t)) for t in texts
    ]
    assert lexical.coverages({}, [("a", FACT)]) == {"a": 0.0}


def test_words_naming_the_project_or_a_generic_action_are_not_part_of_the_share() -> None:
    """In a project's memory every fact is about "this project": a fact that answers "where
    does this project deploy?" without the word must not lose half its keyword share."""
    assert list(lexical.ask_terms(["Where does this project deploy to?"]).values()) == ["deploy"]
    assert list(lexical.ask_terms(["which database does this repo use"]).values()) == ["database"]


def _score(store: HierarchicalMemory, ranking: Ranking) -> float:
    hits = store.search(ASK, top_k=50, fusion=ranking, now=NOW, touch=False)
    return next(h.score for h in hits if h.memory.content == FACT)


def test_a_fact_scores_the_same_alone_and_among_a_thousand_memories(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """The floor is one number for every store: the keyword part of a fact's score must not
    grow with the number of memories beside it (BM25's IDF does: that is what this replaces)."""
    alone = HierarchicalMemory(tmp_path / "a" / "ember.db", embedder, clock=lambda: NOW)
    alone.add(FACT, created_at=NOW)
    crowded = HierarchicalMemory(tmp_path / "b" / "ember.db", embedder, clock=lambda: NOW)
    notes = [f"note {j}: the cache warms item {j} of batch {j % 7}" for j in range(1000)]
    crowded.add_many([NewMemory(t, created_at=NOW) for t in notes], dedup=False)
    crowded.add(FACT, created_at=NOW)
    now_ranking, before = Ranking(), Ranking(lexical="bm25")
    assert _score(alone, now_ranking) == pytest.approx(_score(crowded, now_ranking), abs=0.02)
    assert _score(crowded, before) - _score(alone, before) > 0.05  # what it replaces
    alone.close()
    crowded.close()
