"""Keyword search: safe query building and porter stemming."""

from __future__ import annotations

from pathlib import Path

from ember.memory.index.fts import FtsIndex, match_expression, query_terms
from ember.memory.store.connect import open_memory_db


def test_terms_drop_stopwords_keep_order_and_cap() -> None:
    assert query_terms(["How do we run the Tests?", "tests and CI"]) == ["run", "tests", "ci"]
    many = " ".join(f"word{i}" for i in range(100))
    assert len(query_terms([many])) == 32
    assert query_terms(["first second", many])[:2] == ["first", "second"]


def test_fts_syntax_in_user_text_is_only_ever_a_literal_term(tmp_path: Path) -> None:
    conn = open_memory_db(tmp_path / "e.db", "hnsw").conn
    fts = FtsIndex(conn)
    conn.execute("BEGIN")
    fts.add([1, 2], ["deploy NEAR the edge", 'quoted "column" text'])
    conn.execute("COMMIT")
    nasty = query_terms(['NEAR(deploy edge) OR content: "column* AND -x'])
    assert match_expression(nasty) is not None
    assert {s for s, _ in fts.search(nasty, 10)} == {1, 2}
    assert fts.search(query_terms(["the of and"]), 10) == []


def test_porter_stemming_matches_word_forms(tmp_path: Path) -> None:
    conn = open_memory_db(tmp_path / "e.db", "hnsw").conn
    fts = FtsIndex(conn)
    conn.execute("BEGIN")
    fts.add([1], ["The migrations were running slowly"])
    conn.execute("COMMIT")
    assert [s for s, _ in fts.search(query_terms(["migration runs"]), 5)] == [1]
