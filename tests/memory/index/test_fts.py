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
