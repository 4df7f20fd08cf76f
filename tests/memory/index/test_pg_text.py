"""The keyword index on PostgreSQL gives FTS5's candidates and FTS5's BM25 numbers (issue #24):
the same 1,600 turns of the repository's own conversation set indexed in both, every question
of the set (and its words two by two) asked of both. Against a real PostgreSQL (``pg_url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.memory.index.fts import FtsIndex, query_terms
from ember.memory.index.pg_text import DDL, PgTextIndex
from ember.store.database import Database
from ember.store.pg.connection import PgConnection
from ember.store.schema import PROJECT

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

SET = Path(__file__).parents[3] / "bench" / "data" / "memory_conversations.json"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgConnection]:
    conn = PgConnection(psycopg.connect(pg_url, autocommit=True))
    conn.execute(DDL)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def fts(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "e.db", PROJECT)
    try:
        yield db
    finally:
        db.close()


def _both(pg: PgConnection, fts_db: Database, texts: list[str]) -> None:
    seqs = list(range(1, len(texts) + 1))
    fts_db.write(lambda c: FtsIndex().add(c, seqs, texts))
    PgTextIndex().add(pg, seqs, texts)


def test_the_conversation_sets_questions_rank_as_in_fts5(pg: PgConnection, fts: Database) -> None:
    data = json.loads(SET.read_text(encoding="utf-8"))
    _both(pg, fts, [t["text"] for t in data["turns"]])
    asks = [q["question"] for q in data["questions"]]
    pairs = [" ".join(query_terms([a])[:2]) for a in asks]
    ranked = 0
    for ask in asks + pairs:
        terms = query_terms([ask])
        want = fts.read(lambda c, t=terms: FtsIndex(0).rank(c, t, 40))  # type: ignore[misc]
        got = PgTextIndex(0).rank(pg, terms, 40)
        assert [s for s, _ in got] == [s for s, _ in want], ask
        assert [round(x, 9) for _, x in got] == [round(x, 9) for _, x in want], ask
        ranked += bool(want)
    assert ranked > len(asks)  # most asks found something to compare


def test_counts_narrowing_size_and_removal_agree(pg: PgConnection, fts: Database) -> None:
    texts = [
        "The user_id column is indexed; user id lookups are fast.",
        "Run the migrations before the user service starts.",
        "Deploys go to fly.io; the deploy token lives in the vault.",
        "Naïve caching of user_id values broke the cafe reports.",
    ]
    _both(pg, fts, texts)
    words = ["user_id", "user", "deploy", "naive", "café", "missing"]
    f, p = FtsIndex(0), PgTextIndex(0)
    assert p.doc_counts(pg, words) == fts.read(lambda c: f.doc_counts(c, words))
    assert p.doc_counts(pg, words)["user_id"] == 2  # a phrase: side by side only
    assert p.size(pg) == fts.read(f.size) == 4
    narrowed = p.rank(pg, ["user"], None, between=(2, 4))
    assert narrowed == fts.read(lambda c: f.rank(c, ["user"], None, between=(2, 4)))
    assert p.matching(pg, ["deploy", "user_id"]) == fts.read(
        lambda c: f.matching(c, ["deploy", "user_id"])
    )
    p.remove(pg, [1, 3])
    fts.write(lambda c: f.remove(c, [1, 3]))
    assert p.rank(pg, ["user"], None) == fts.read(lambda c: f.rank(c, ["user"], None))
    p.reset(pg)
    assert p.size(pg) == 0 and p.rank(pg, ["user"], 5) == []


def test_user_text_in_terms_is_only_ever_a_word(pg: PgConnection) -> None:
    PgTextIndex().add(pg, [1], ["deploy NEAR the edge'); DROP TABLE memory_terms; --"])
    nasty = query_terms(["'); DROP TABLE memory_terms; -- NEAR(deploy)"])
    assert [s for s, _ in PgTextIndex().search(pg, nasty, 5)] == [1]
    assert PgTextIndex().size(pg) == 1
