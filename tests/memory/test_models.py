"""The data model: derived scope, content hashes, and one visibility rule in two forms."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

import ember.memory
from ember.memory import Memory, MemoryFilter, Scope, derive_scope
from ember.memory.models import content_hash
from ember.memory.rows import filter_sql

ids = st.one_of(st.none(), st.sampled_from(["a", "b"]))


def test_public_api_is_importable() -> None:
    for name in ember.memory.__all__:
        assert getattr(ember.memory, name) is not None


def test_scope_precedence() -> None:
    assert derive_scope("u", None, None, None) is Scope.USER
    assert derive_scope("u", "s", None, None) is Scope.SESSION
    assert derive_scope(None, "s", "a", None) is Scope.AGENT
    assert derive_scope(None, "s", "a", "t") is Scope.TURN
    assert derive_scope(None, None, None, None) is Scope.USER


def test_content_hash_ignores_case_and_spacing_but_not_punctuation() -> None:
    assert content_hash("Uses  pytest\n") == content_hash("uses pytest")
    assert content_hash("v1.2") != content_hash("v12")


@given(ids, ids, ids, ids, ids, ids, ids, ids)
def test_sql_filter_and_python_filter_agree(
    mu: str | None,
    ms: str | None,
    ma: str | None,
    mt: str | None,
    fu: str | None,
    fs: str | None,
    fa: str | None,
    ft: str | None,
) -> None:
    m = Memory(
        id="x",
        content="c",
        created_at=0,
        valid_from=0,
        user_id=mu,
        session_id=ms,
        agent_id=ma,
        turn_id=mt,
    )
    f = MemoryFilter(user_id=fu, session_id=fs, agent_id=fa, turn_id=ft)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE memories (user_id, session_id, agent_id, turn_id)")
    conn.execute("INSERT INTO memories VALUES (?,?,?,?)", (mu, ms, ma, mt))
    where, args = filter_sql(f)
    in_sql = conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", args).fetchone()[0]
    assert bool(in_sql) == f.admits(m)
