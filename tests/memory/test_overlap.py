"""The two sides of a search at once: same results, and never a wait behind a busy pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ember.memory import overlap
from ember.memory.core import HierarchicalMemory
from ember.memory.retrieval.rank import Ranking


def test_both_returns_each_result_in_order() -> None:
    assert overlap.both(lambda: "aside", lambda: 42) == ("aside", 42)


def test_an_error_on_either_side_reaches_the_caller() -> None:
    def boom() -> None:
        raise ValueError("keyword side failed")

    with pytest.raises(ValueError, match="keyword side failed"):
        overlap.both(boom, lambda: 1)
    with pytest.raises(KeyError):
        overlap.both(lambda: 1, lambda: {}["missing"])


@pytest.fixture
def busy_pool() -> Iterator[threading.Event]:
    """Every worker of the shared pool blocked until the test releases them."""
    release = threading.Event()
    started = threading.Barrier(overlap._workers() + 1)

    def hold() -> None:
        started.wait()
        release.wait(10)

    pool = overlap._shared_pool()
    futures = [pool.submit(hold) for _ in range(overlap._workers())]
    started.wait(5)
    yield release
    release.set()
    for f in futures:
        f.result(5)


def test_a_busy_pool_never_makes_a_search_wait(busy_pool: threading.Event) -> None:
    """With every pool thread taken (many searches at once), the queued half runs on the
    caller's thread at once instead of waiting for a worker to come free."""
    ran_on: list[int] = []
    t = time.monotonic()
    result = overlap.both(lambda: ran_on.append(threading.get_ident()) or "a", lambda: "b")
    assert result == ("a", "b")
    assert ran_on == [threading.get_ident()]
    assert time.monotonic() - t < 5  # the workers are held for 10 s


FACTS = [
    "The billing service deploys to eu-west-1 every Tuesday",
    "Use PostgreSQL 16 for the ledger database",
    "The CI runs pytest with xdist on four workers",
    "Deploys need a green staging run first",
    "The ledger database is backed up nightly to the staging bucket",
    "Alice owns the deploy script and its rollback",
]
ASKS = ["where does billing deploy", "which database does the ledger use", "how does CI run tests"]


@pytest.mark.parametrize("fusion", ["norm", "mix", "rrf", "vector", "bm25"])
def test_overlapped_search_gives_the_same_bytes_as_one_after_the_other(
    store: HierarchicalMemory, fusion: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for fact in FACTS:
        store.add(fact)
    ranking = Ranking(fusion)  # type: ignore[arg-type]

    def run() -> list[str]:
        return [
            repr([(h.memory.id, h.score, h.similarity, h.lexical) for h in hits])
            for hits in (store.search(a, fusion=ranking, touch=False) for a in ASKS)
        ]

    together = run()
    monkeypatch.setattr(overlap, "both", overlap.one_after_other)
    assert run() == together
    assert any("(" in r for r in together)  # the asks found something
