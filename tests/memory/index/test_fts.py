"""Keyword search: safe query building and porter stemming."""

from __future__ import annotations

from pathlib import Path

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
    """Ten memories hold "deploy", two "ledger", one "kafka"."""
    db = Database(tmp_path / "b.db", PROJECT)
    texts = [f"deploy step {i}" for i in range(8)]
    texts += ["deploy the ledger nightly", "ledger backups go to the kafka topic"]
    texts += ["deploy notes"]
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
    """Bounded: "deploy" (in 10 of 11 memories) would make every memory a scored match."""
    fts = FtsIndex(postings_budget=3)
    db = _store(tmp_path, fts)
    terms = query_terms(["deploy the ledger to kafka"])
    assert db.read(lambda c: fts.bounded(c, terms)) == ["kafka", "ledger"]
    assert {s for s, _ in db.read(lambda c: fts.search(c, terms, 20))} == {9, 10}
    assert len(db.read(lambda c: fts.rank(c, terms, 20))) == 11  # what it would have scored
    # The rarest term stays even when it alone is over the budget: an ask always has a query.
    assert db.read(lambda c: FtsIndex(postings_budget=1).bounded(c, ["deploy", "step"])) == ["step"]
    unbounded = FtsIndex(postings_budget=0)
    assert db.read(lambda c: unbounded.bounded(c, terms)) == terms
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
