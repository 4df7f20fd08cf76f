"""Keyword search: safe query building and porter stemming."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.memory.index.fts import FtsIndex, match_expression, query_terms
from ember.store.database import Database
from ember.store.schema import PROJECT


def test_terms_drop_stopwords_keep_order_and_cap() -> None:
    assert query_terms(["How do we run the Tests?", "tests and CI"]) == ["run", "tests", "ci"]
    many = " ".join(f"word{i}" for i in range(100))
    assert len(query_terms([many])) == 32
    assert query_terms(["first second", many])[:2] == ["first", "second"]


def test_fts_syntax_in_user_text_is_only_ever_a_literal_term(tmp_path: Path) -> None:
    db = Database(tmp_path / "e.db", PROJECT)
    fts = FtsIndex()
    db.write(lambda c: fts.add(c, [1, 2], ["deploy NEAR the edge", 'quoted "column" text']))
    nasty = query_terms(['NEAR(deploy edge) OR content: "column* AND -x'])
    assert match_expression(nasty) is not None
    assert {s for s, _ in db.read(lambda c: fts.search(c, nasty, 10))} == {1, 2}
    assert db.read(lambda c: fts.search(c, query_terms(["the of and"]), 10)) == []
    db.close()


def test_porter_stemming_matches_word_forms(tmp_path: Path) -> None:
    db = Database(tmp_path / "e.db", PROJECT)
    fts = FtsIndex()
    db.write(lambda c: fts.add(c, [1], ["The migrations were running slowly"]))
    hits = db.read(lambda c: fts.search(c, query_terms(["migration runs"]), 5))
    assert [s for s, _ in hits] == [1]
    db.close()


def _store(tmp_path: Path, fts: FtsIndex) -> Database:
    """Twenty memories: eight hold "deploy", six "step", two "ledger", one "kafka"; eleven
    are about something else."""
    db = Database(tmp_path / "b.db", PROJECT)
    texts = [f"deploy step {i}" for i in range(6)]
    texts += ["deploy the ledger nightly", "ledger backups go to the kafka topic"]
    texts += ["deploy notes", "deploy window"]
    texts += [f"misc fact {i}" for i in range(10)]
    db.write(lambda c: fts.add(c, list(range(1, len(texts) + 1)), texts))
    return db


def test_an_ask_within_the_postings_budget_is_searched_with_every_term(tmp_path: Path) -> None:
    fts = FtsIndex(postings_budget=1000)
    db = _store(tmp_path, fts)
    terms = query_terms(["deploy the ledger to kafka"])
    assert db.read(lambda c: fts.bounded(c, terms)) == terms
    assert db.read(lambda c: fts.search(c, terms, 20)) == db.read(lambda c: fts.rank(c, terms, 20))
    db.close()


def test_over_the_budget_the_most_common_terms_leave_the_candidate_query(tmp_path: Path) -> None:
    """Bounded: "deploy" (in 8 of 20 memories) would make all 10 matches scored ones."""
    fts = FtsIndex(postings_budget=3)
    db = _store(tmp_path, fts)
    terms = query_terms(["deploy the ledger to kafka"])
    assert db.read(lambda c: fts.bounded(c, terms)) == ["ledger", "kafka"]
    assert {s for s, _ in db.read(lambda c: fts.search(c, terms, 20))} == {7, 8}
    assert len(db.read(lambda c: fts.rank(c, terms, 20))) == 10  # what it would have scored
    # The rarest term stays even when it alone is over the budget: an ask always has a query.
    assert db.read(lambda c: FtsIndex(postings_budget=1).bounded(c, ["deploy", "step"])) == ["step"]
    unbounded = FtsIndex(postings_budget=0)
    assert db.read(lambda c: unbounded.bounded(c, terms)) == terms
    db.close()


def test_a_term_most_memories_hold_never_makes_them_candidates(tmp_path: Path) -> None:
    """FTS5 scores a term held by more than half the rows at ~0 (its IDF is clamped), so it
    only made every such row a scored candidate: a word every fact shares (the project's
    name, "ticket N" in every numbered note) cost a scan of the whole store per ask."""
    db = Database(tmp_path / "c.db", PROJECT)
    fts = FtsIndex()
    texts = [f"ember ticket {i} about nothing" for i in range(30)]
    texts += ["ember ticket 30: the ledger runs nightly", "the kafka topic holds ledger backups"]
    db.write(lambda c: fts.add(c, list(range(1, len(texts) + 1)), texts))
    terms = query_terms(["when does the ember ledger run"])
    assert db.read(lambda c: fts.bounded(c, terms)) == ["ledger", "run"]
    every = dict(db.read(lambda c: fts.rank(c, terms, None)))
    assert len(every) == 32 and all(every[s] < 1e-4 for s in range(1, 31))  # ~0, as said
    found = db.read(lambda c: fts.search(c, terms, 10))
    assert [s for s, _ in found] == [31, 32]
    # The same order, the same scores but for the common word's ~1e-6.
    assert found == [(s, pytest.approx(every[s], rel=1e-5)) for s in (31, 32)]
    # An ask made only of common words keeps its rarest: it still has a query.
    assert db.read(lambda c: fts.bounded(c, ["ember", "ticket"])) == ["ember"]
    db.close()


def test_a_word_no_memory_holds_never_takes_the_place_of_the_ones_they_hold(
    tmp_path: Path,
) -> None:
    """In a one-fact store every word the fact holds is held by "more than half" of the
    memories; the ask's word no memory holds ("use") was kept in their place as the rarest,
    and the OR of it matched nothing: the fact was no keyword candidate of its own ask."""
    db = Database(tmp_path / "d.db", PROJECT)
    fts = FtsIndex()
    db.write(lambda c: fts.add(c, [1], ["The staging database is PostgreSQL 16 on db-staging."]))
    terms = query_terms(["which database does staging use"])
    assert [s for s, _ in db.read(lambda c: fts.search(c, terms, 10))] == [1]
    assert db.read(lambda c: fts.search(c, query_terms(["unheard words"]), 10)) == []
    db.close()


def test_with_common_a_term_most_memories_hold_still_finds_them(tmp_path: Path) -> None:
    """A search with no vector side (``common``): a memory holding only the ask's common
    words is still a candidate; the postings budget still bounds it."""
    db = Database(tmp_path / "c.db", PROJECT)
    fts = FtsIndex()
    texts = ["staging database is PostgreSQL", "staging server is in Frankfurt", "staging CI"]
    db.write(lambda c: fts.add(c, [1, 2, 3], texts))
    terms = query_terms(["staging database"])
    assert [s for s, _ in db.read(lambda c: fts.search(c, terms, 10))] == [1]
    found = db.read(lambda c: fts.search(c, terms, 10, common=True))
    assert found[0][0] == 1 and {s for s, _ in found} == {1, 2, 3}
    tight = FtsIndex(postings_budget=2)
    assert db.read(lambda c: tight.bounded(c, terms, common=True)) == ["database"]
    db.close()


class _Counting(FtsIndex):
    """Counts the postings scans (one per document count) the index runs."""

    def __init__(self, postings_budget: int) -> None:
        super().__init__(postings_budget)
        self.scans: list[str] = []

    def _count(self, conn, expr):  # type: ignore[no-untyped-def]
        self.scans.append(expr)
        return super()._count(conn, expr)


def test_an_ask_over_the_budget_counts_each_word_once(tmp_path: Path) -> None:
    """The candidate query and the keyword share both need document counts of the ask's
    words; over the budget, each word's postings are scanned once, not once per use."""
    from ember.memory import search
    from ember.memory.retrieval.query import MemoryQuery
    from ember.memory.retrieval.rank import Ranking

    fts = _Counting(postings_budget=3)
    db = _store(tmp_path, fts)
    ask = MemoryQuery("deploy the ledger to kafka")
    side = db.read(
        lambda c: search.keyword_side(c, fts, ask, depth=10, ranking=Ranking(), candidates=True)
    )
    assert set(side.weights) == {"deploi", "ledger", "kafka"}
    single = [e for e in fts.scans if " OR " not in e]
    assert sorted(single) == ['"deploy"', '"kafka"', '"ledger"']
    db.close()
