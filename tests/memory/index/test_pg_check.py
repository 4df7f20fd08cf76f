"""The PostgreSQL memory indexes' agreement check: silent on a store ember wrote, and it names
each kind of disagreement a write cut half-way could leave."""

from __future__ import annotations

import pytest

from ember.memory.index.pg_check import problems
from tests.memory.conftest import OpenStore

pytest.importorskip("psycopg", reason="the postgres extra is not installed")


@pytest.fixture
def index_kind() -> str:
    return "postgres"


def test_a_store_ember_wrote_agrees_and_each_cut_is_named(open_store: OpenStore) -> None:
    store = open_store()
    first = store.add("The API server uses PostgreSQL 16 in production")
    store.add("Releases deploy to eu-west-1 on tags")
    store.add("Tests run with pytest -q")
    store.delete(first.id)
    old = store.add("The staging database is PostgreSQL 15")
    store.supersede(old.id, "The staging database is PostgreSQL 16")  # history: unindexed
    db = store.database
    assert db.read(problems) == {}
    cuts = {
        "memories missing from the keyword index": "DELETE FROM memory_doclen WHERE seq = "
        "(SELECT MIN(seq) FROM memories)",
        "term rows of no memory": "INSERT INTO memory_terms VALUES ('ghost', 999999, 1, 1, '{0}')",
        "graph rows of no stored vector": "DELETE FROM memory_vectors WHERE seq = "
        "(SELECT MAX(seq) FROM memories)",
    }
    for what, sql in cuts.items():
        db.write(lambda conn, sql=sql: conn.execute(sql))
        assert what in db.read(problems), what
    assert "keyword statistics that are not the rows' sums" in db.read(problems)
