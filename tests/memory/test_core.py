"""HierarchicalMemory: the behaviour a user of the store relies on, on both vector indexes
and on PostgreSQL."""

from __future__ import annotations

import pytest

from ember.memory import (
    Evidence,
    HierarchicalMemory,
    MemoryFilter,
    MemoryInputError,
    MemoryNotFound,
    NewMemory,
    Scope,
)
from tests.memory.conftest import Clock, OpenStore, RawSql

DAY = 86400.0


@pytest.fixture(params=["sqlite-vec", "hnsw", "postgres"])
def index_kind(request: pytest.FixtureRequest) -> str:
    """Every behaviour here on both vector indexes of SQLite, and on PostgreSQL (``pg_url``)."""
    return str(request.param)


def _ids(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.memory.id for h in hits]


def test_scope_is_derived_from_the_ids_that_are_set(store: HierarchicalMemory) -> None:
    assert store.add("project fact").scope is Scope.USER
    assert store.add("alice fact", user_id="alice").scope is Scope.USER
    assert store.add("session fact", session_id="s1").scope is Scope.SESSION
    assert store.add("agent fact", session_id="s1", agent_id="a1").scope is Scope.AGENT
    assert store.add("turn fact", session_id="s1", turn_id="t1").scope is Scope.TURN
    assert store.add("blank ids are no ids", session_id="  ").scope is Scope.USER


def test_add_dedups_identical_current_facts_in_the_same_scope(store: HierarchicalMemory) -> None:
    a = store.add("Uses  pytest")
    assert store.add("uses pytest").id == a.id
    other_scope = store.add("uses pytest", session_id="s2")
    assert other_scope.id != a.id
    assert store.count() == 2


def test_bad_input_is_refused_naming_the_field(store: HierarchicalMemory) -> None:
    with pytest.raises(MemoryInputError, match="content"):
        store.add("   ")
    with pytest.raises(MemoryInputError, match="importance"):
        store.add("x", importance=1.5)
    assert store.count() == 0


def test_supersede_keeps_the_old_row_as_history_and_searches_only_the_new(
    store: HierarchicalMemory, clock: Clock
) -> None:
    old = store.add("The API server uses PostgreSQL 16", category="environment")
    clock.advance(60)
    new = store.supersede(old.id, "The API server uses PostgreSQL 17")
    assert new.supersedes == old.id and new.category == "environment"
    kept = store.get(old.id)
    assert kept is not None and not kept.is_current
    assert kept.superseded_by == new.id and kept.valid_until == clock.now
    assert [m.content for m in store.history(new.id)] == [old.content, new.content]
    hits = store.search("which PostgreSQL version does the API server use")
    assert _ids(hits) == [new.id]
    assert [m.id for m in store.list()] == [new.id]
    assert {m.id for m in store.list(include_history=True)} == {old.id, new.id}
    with pytest.raises(MemoryInputError, match="already superseded"):
        store.supersede(old.id, "PostgreSQL 18")


def test_important_session_fact_is_copied_to_user_scope_not_moved(
    store: HierarchicalMemory,
) -> None:
    fact = store.add("The staging database is read-only", importance=0.8, session_id="s1")
    assert fact.scope is Scope.SESSION
    everything = store.list()
    copies = [m for m in everything if m.promoted_from == fact.id]
    assert len(everything) == 2 and len(copies) == 1
    copy = copies[0]
    assert copy.scope is Scope.USER and copy.promotion_chain == (fact.id,)
    assert copy.content == fact.content and store.get(fact.id) == fact  # original stays put
    # Another session sees the user-wide copy, and never the session original.
    seen = store.search("staging database", memory_filter=MemoryFilter(session_id="s2"))
    assert _ids(seen) == [copy.id]
    # In the original session the fact appears once, not twice.
    assert len(store.search("staging database", memory_filter=MemoryFilter(session_id="s1"))) == 1


def test_unimportant_and_user_scope_facts_do_not_bubble(store: HierarchicalMemory) -> None:
    store.add("minor session detail", importance=0.69, session_id="s1")
    store.add("important user fact", importance=0.9)
    assert all(m.promoted_from is None for m in store.list())
    assert store.count() == 2


def test_a_copy_is_never_bubbled_again_and_the_same_fact_bubbles_once(
    store: HierarchicalMemory,
) -> None:
    store.add("Deploys happen on Fridays", importance=0.9, session_id="s1")
    store.add("Deploys happen on Fridays", importance=0.9, session_id="s2")
    user_wide = [m for m in store.list() if m.scope is Scope.USER]
    assert len(user_wide) == 1
    assert store.count() == 3


def test_superseding_a_bubbled_fact_closes_its_user_wide_copy(store: HierarchicalMemory) -> None:
    fact = store.add("CI runs on Jenkins", importance=0.9, session_id="s1")
    store.supersede(fact.id, "CI runs on GitHub Actions")
    current = [m.content for m in store.list()]
    assert "CI runs on Jenkins" not in current
    assert current.count("CI runs on GitHub Actions") == 2  # the session fact and its copy
    hits = store.search("which CI system runs", memory_filter=MemoryFilter(session_id="other"))
    assert [h.memory.content for h in hits] == ["CI runs on GitHub Actions"]


def test_delete_is_a_true_delete_everywhere(store: HierarchicalMemory) -> None:
    fact = store.add("The release key lives in the vault", importance=0.9, session_id="s1")
    keep = store.add("Unrelated fact about tabs")
    deleted = store.delete(fact.id)
    assert len(deleted) == 2  # the fact and its user-wide copy
    assert store.get(fact.id) is None and store.list() == [keep]
    assert all(h.memory.id == keep.id for h in store.search("release key vault"))
    conn = RawSql(store)
    assert conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == 1
    text_rows = "memory_doclen" if store.index_name == "pgvector" else "memory_fts"
    assert conn.execute(f"SELECT COUNT(*) FROM {text_rows}").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM memory_evidence").fetchone()[0] == 0
    if store.index_name in ("sqlite-vec", "pgvector"):
        assert conn.execute("SELECT COUNT(*) FROM memory_vec").fetchone()[0] == 1
    assert store.delete(fact.id) == []


def test_update_corrects_in_place_and_reindexes(store: HierarchicalMemory) -> None:
    m = store.add("Builds use make")
    store.update(m.id, content="Builds use ninja", importance=0.3, metadata={"by": "test"})
    got = store.get(m.id)
    assert got is not None and got.content == "Builds use ninja" and got.importance == 0.3
    assert dict(got.metadata) == {"by": "test"}
    assert _ids(store.search("ninja builds")) == [m.id]
    assert store.search("make", fusion="bm25") == []
    with pytest.raises(MemoryNotFound):
        store.update("nope", content="x")


def test_raising_importance_past_the_threshold_bubbles(store: HierarchicalMemory) -> None:
    m = store.add("Ports below 1024 need root", importance=0.2, session_id="s1")
    store.update(m.id, importance=0.75)
    assert any(x.promoted_from == m.id for x in store.list())


def test_memories_survive_a_restart_and_search_needs_no_rebuild(
    open_store: OpenStore, embedder: object
) -> None:
    first = open_store("proj")
    kept = first.add("The frontend is built with Vite")
    gone = first.add("The old bundler was webpack")
    first.delete(gone.id)
    first.close()
    calls_before = embedder.calls  # type: ignore[attr-defined]
    again = open_store("proj")
    hits = again.search("which tool builds the frontend")
    assert _ids(hits)[:1] == [kept.id]
    assert gone.id not in _ids(hits)
    # Only the query was embedded: nothing was re-embedded to rebuild an index.
    assert embedder.calls == calls_before + 1  # type: ignore[attr-defined]


def test_a_failed_transaction_leaves_rows_and_indexes_unchanged(
    store: HierarchicalMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add("first fact about redis caching")
    from ember.memory import rows

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(rows, "add_evidence", boom)
    with pytest.raises(RuntimeError):
        store.add("second fact about redis clusters")
    monkeypatch.undo()
    assert [m.content for m in store.list()] == ["first fact about redis caching"]
    hits = store.search("redis clusters")
    assert [h.memory.content for h in hits] == ["first fact about redis caching"]
    conn = RawSql(store)
    assert conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()[0] == 1


def test_a_write_by_another_process_is_seen(open_store: OpenStore) -> None:
    proxy_side = open_store("shared")
    cli_side = open_store("shared")
    m = proxy_side.add("Secrets are in 1Password")
    assert proxy_side.get(m.id) is not None  # now cached
    cli_side.delete(m.id)
    assert proxy_side.get(m.id) is None
    assert proxy_side.search("where are secrets") == []
    n = cli_side.add("Secrets moved to Vault")
    assert _ids(proxy_side.search("where are secrets kept")) == [n.id]


def test_evidence_points_at_exactly_one_target(store: HierarchicalMemory) -> None:
    ev = (Evidence("user-stated", message_id="m1"), Evidence("observed-outcome", session_id="s9"))
    m = store.add_many([NewMemory("Use uv for envs", evidence=ev)])[0]
    assert store.evidence(m.id) == list(ev)
    with pytest.raises(ValueError):
        Evidence("user-stated", message_id="m1", session_id="s1")
    with pytest.raises(ValueError):
        Evidence("guessed", message_id="m1")  # type: ignore[arg-type]


def test_search_counts_access_for_the_export_ranking(store: HierarchicalMemory) -> None:
    m = store.add("The linter is ruff")
    store.search("which linter")
    store.search("which linter", touch=False)
    store.flush(10)  # access counts are written in the background: no ask waits for them
    got = store.get(m.id)
    assert got is not None and got.access_count == 1


def test_turn_memories_are_only_visible_to_their_turn(store: HierarchicalMemory) -> None:
    store.add("scratch value for this call is 42", turn_id="t1")
    assert store.search("scratch value") == []
    assert len(store.search("scratch value", memory_filter=MemoryFilter(turn_id="t1"))) == 1


def test_recency_breaks_otherwise_equal_matches(store: HierarchicalMemory, clock: Clock) -> None:
    old = store.add("deploy target is fly.io", created_at=clock.now - 90 * DAY)
    new = store.add("deploy target is render.com", created_at=clock.now - DAY)
    hits = store.search("deploy target")
    assert _ids(hits) == [new.id, old.id]
    assert hits[0].score >= hits[1].score


def test_an_empty_store_says_so_and_a_store_with_memories_is_not_looked_at_again(
    store: HierarchicalMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new ask of a project without memories never loads the model; one of a project with
    memories does not read the file again to learn it still has some."""
    from ember.memory import core

    assert store.is_empty()
    assert not store.known_nonempty()  # the request path then asks is_empty on a thread
    fact = store.add("Deploys go to fly.io")
    assert not store.is_empty()
    assert store.known_nonempty()  # ... and now does not need to
    store.delete(fact.id)
    assert not store.is_empty()  # within NONEMPTY_SECONDS: taken to hold memories still
    monkeypatch.setattr(core, "NONEMPTY_SECONDS", 0.0)
    assert not store.known_nonempty()
    assert store.is_empty()
