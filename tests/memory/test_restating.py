"""Corrections replace what they correct, and the same fact in other words is kept once.

The policy (``restating``) on measured pairs; then the store: a fact stored with
``supersedes`` ends the memories it names (kept as history), and a restated fact — whichever
door it comes in by — leaves one current memory, the newer wording unless it says less.
"""

from __future__ import annotations

import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.memory.models import NewMemory
from ember.memory.restating import Restatement, restatement, values
from tests.memory.conftest import OpenStore

# (old, new, what new is to old) — the cosines are MiniLM's, measured in the test below.
PAIRS = [
    ("We deploy to Fly.io", "Deploys go to Fly.io", Restatement.REWORDED),
    ("Tests run with pytest -x", "Run the tests with pytest -x", Restatement.REWORDED),
    ("The API uses PostgreSQL 16", "The API's database is PostgreSQL 16", Restatement.REWORDED),
    (
        "Releases deploy to eu-west-1 through the deploy workflow on tags",
        "Tagged releases are deployed to eu-west-1 by the deploy workflow",
        Restatement.REWORDED,
    ),
    (
        "Use ruff for linting and formatting",
        "Linting and formatting are done with ruff",
        Restatement.SAME,
    ),
    # A changed value, another platform, a refinement, another part: never one fact.
    ("The API uses PostgreSQL 16", "The API uses PostgreSQL 15", Restatement.NONE),
    ("The staging DB is on port 5432", "The staging DB is on port 5433", Restatement.NONE),
    ("We deploy to Fly.io", "We deploy to Render", Restatement.NONE),
    (
        "We deploy to Fly.io",
        "We no longer deploy to Fly.io, deploys go to Render",
        Restatement.NONE,
    ),
    ("The frontend uses React 18", "The admin panel uses React 18", Restatement.NONE),
    ("Tests run with pytest", "Tests run with pytest and xdist", Restatement.NONE),
    # The same words the other way round: a contradiction, and the newer statement wins.
    (
        "The user prefers tabs over spaces",
        "The user prefers spaces over tabs",
        Restatement.REWORDED,
    ),
]


def test_values_are_the_exact_things_a_fact_names() -> None:
    assert values("We deploy to Fly.io on port 5432") == {"fly.io", "5432"}
    assert values("The API's database is PostgreSQL 16.") == {"api", "postgresql", "16"}
    assert values("Deploys use `make deploy-prod`") == {"deploy-prod"}
    assert values("Tests run with pytest") == frozenset()


@pytest.mark.parametrize(("old", "new", "expected"), PAIRS)
def test_restatements_measured_with_the_shipped_embedder(
    old: str, new: str, expected: Restatement
) -> None:
    a, b = get_embedder().embed([old, new])
    assert restatement(new, old, float(a @ b)) is expected


def test_far_meanings_are_never_one_fact_whatever_the_words() -> None:
    assert restatement("We deploy to Fly.io", "We deploy to Fly.io", 0.5) is Restatement.NONE


# -- the store ---------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite-vec", "hnsw"])
def index_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def real(open_store: OpenStore) -> HierarchicalMemory:
    return open_store(embedder=get_embedder())


def current(store: HierarchicalMemory) -> list[str]:
    return sorted(m.content for m in store.list())


def test_a_fact_that_supersedes_ends_what_it_names(real: HierarchicalMemory) -> None:
    old = real.add("We deploy to Fly.io")
    other = real.add("Tests run with make test")
    new = real.add_many(
        [NewMemory("Deploys go to Render since March", supersedes=(old.id, "0123456789ab"))]
    )[0]
    assert current(real) == ["Deploys go to Render since March", "Tests run with make test"]
    history = real.history(new.id)
    assert [m.id for m in history] == [old.id, new.id]
    assert history[0].superseded_by == new.id and history[0].valid_until is not None
    assert real.get(other.id).is_current  # type: ignore[union-attr]
    hits = real.search("where do we deploy", top_k=5)
    assert old.id not in {h.memory.id for h in hits}  # history is never found again


def test_a_restated_fact_replaces_the_older_wording(real: HierarchicalMemory) -> None:
    old = real.add("We deploy to Fly.io")
    new = real.add("Deploys go to Fly.io")
    assert new.id != old.id
    assert current(real) == ["Deploys go to Fly.io"]
    assert real.get(old.id).superseded_by == new.id  # type: ignore[union-attr]


def test_a_fact_that_says_less_keeps_the_one_already_there(real: HierarchicalMemory) -> None:
    old = real.add("Use ruff for linting and formatting")
    again = real.add("Linting and formatting are done with ruff")
    assert again.id == old.id
    assert current(real) == ["Use ruff for linting and formatting"]


def test_a_correction_of_a_value_is_not_merged_without_being_named(
    real: HierarchicalMemory,
) -> None:
    real.add("The API uses PostgreSQL 15")
    real.add("The API uses PostgreSQL 16")
    assert current(real) == ["The API uses PostgreSQL 15", "The API uses PostgreSQL 16"]


def test_facts_of_another_scope_are_never_merged(real: HierarchicalMemory) -> None:
    real.add("We deploy to Fly.io", session_id="s1")
    real.add("Deploys go to Fly.io", session_id="s2")
    assert len(real.list()) == 2


def test_current_follows_a_memory_to_its_successor(real: HierarchicalMemory) -> None:
    a = real.add("We deploy to Fly.io")
    b = real.add("Deploys go to Fly.io")  # replaces a
    c = real.add("Tests run with make test")
    assert [m.id for m in real.current([a.id, c.id, b.id, "0123456789ab"])] == [b.id, c.id]
