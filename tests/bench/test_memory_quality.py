"""bench/memory_quality.py builds a set the same way every run: two builds of one set give the
same memory ids, so exact score ties break the same way and two runs' rows compare."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ember.memory import HierarchicalMemory
from ember.memory.retrieval.rank import Ranking
from tests.bench.conftest import bench_module
from tests.memory.conftest import HashEmbedder


@pytest.fixture(scope="module")
def mq() -> Iterator[ModuleType]:
    with bench_module("memory_quality") as module:
        yield module


@pytest.fixture(scope="module")
def sets() -> Iterator[ModuleType]:
    with bench_module("memory_sets") as module:
        yield module


def tiny_set(sets: ModuleType) -> object:
    day = 86_400.0
    texts = ["the deploy goes to eu-west", "we use postgres", "the deploy goes to eu-west"]
    texts.append("lunch was good")
    turns = tuple(
        sets.Turn(f"t{i}", text, 1_780_000_000.0 + i * day, "s") for i, text in enumerate(texts)
    )
    ask = sets.Question("where does the deploy go", frozenset({"t2"}))
    return sets.EvalSet("tiny", "dev", turns, (ask,), 1_780_000_000.0 + 9 * day)


def test_two_builds_give_the_same_ids_and_ranks(
    mq: ModuleType, sets: ModuleType, tmp_path: Path
) -> None:
    es = tiny_set(sets)
    built = []
    for name in ("a.db", "b.db"):
        store = HierarchicalMemory(tmp_path / name, HashEmbedder())
        turn_of = mq.build(store, es)
        rrf = mq.ranks(store, turn_of, es, Ranking(fusion="rrf"))
        built.append((turn_of, rrf, [h.memory.id for h in store.search("deploy", top_k=4)]))
        store.close()
    assert built[0] == built[1]
    # Ids follow store order, and the build leaves random ids to everything after it.
    assert list(built[0][0]) == [f"{i:012x}" for i in range(1, 5)]
    assert built[0][0]["000000000003"] == "t2"
    store = HierarchicalMemory(tmp_path / "c.db", HashEmbedder())
    later = store.add("a memory stored after the build")
    assert later.id not in built[0][0]
    store.close()


def _named(sets: ModuleType, name: str) -> object:
    es = tiny_set(sets)
    return sets.EvalSet(name, "dev", es.turns, es.questions, es.now)  # type: ignore[attr-defined]


def test_the_held_out_store_is_never_calibrated_or_tuned_on(
    mq: ModuleType, sets: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "chitchat-apr" in sets.HELD_OUT
    every = [_named(sets, n) for n in ("generated", "agent-logs", *sets.CHITCHAT_SETS)]
    assert [x.name for x in mq.own_stores(every)] == [
        "generated", "agent-logs", "chitchat", "chitchat-may"
    ]  # fmt: skip
    # The tune pick sums the dev rows of every set but the held-out one.
    rows = [
        {"set": s, "split": "dev", "context": "none", "embedder": "e", "method": m,
         "ranks": ranks, "mrr": 0.5}
        for s, m, ranks in [
            ("chitchat", "a", [1, None]), ("chitchat", "b", [None, None]),
            ("chitchat-apr", "a", [None, None]), ("chitchat-apr", "b", [1, 1]),
        ]
    ]  # fmt: skip
    mq.print_tune(rows, {"a", "b"})
    out = capsys.readouterr().out
    assert "dev: chitchat)" in out
    assert "pick: a;" in out  # b would win if the held-out rows counted


def test_recall_by_kind_counts_each_kind_of_each_set_apart(
    mq: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    kinds = ["temporal", "single-hop", "temporal", "single-hop"]
    rows = [
        {"set": "chitchat", "split": split, "context": "none", "method": m, "kinds": kinds,
         "ranks": ranks}
        for split in ("dev", "test")
        for m, ranks in [("chosen", [1, None, None, 3]), ("vector only", [None] * 4),
                         ("bm25 only", [2, 2, 2, 2]), ("rrf", [1, 1, 1, 1])]
    ]  # fmt: skip
    rows.append({**rows[0], "set": "generated", "kinds": [""] * 4})  # no kinds: not shown
    mq.print_kinds(rows)
    lines = capsys.readouterr().out.splitlines()
    assert [x.split() for x in lines if x.startswith("chitchat")] == [
        ["chitchat", "temporal", "4", "0.500", "0.000", "1.000"],
        ["chitchat", "single-hop", "4", "0.500", "0.000", "1.000"],
    ]
    assert not any(x.startswith("generated") for x in lines)
