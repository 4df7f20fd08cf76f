"""The hand-written questions of the ``chitchat`` and ``chitchat-may`` evaluation sets
(bench/memory_sets.py) point at real turns. The conversations are not in the repository: the
checks that need them skip unless the ``chitchat-dataset`` package is installed or
``EMBER_BENCH_CHITCHAT`` names its dataset.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench.conftest import BENCH, bench_module

QUESTIONS = BENCH / "data" / "chitchat_questions.json"
# Each set: its questions file, conversations and message turns.
STORES = {
    "chitchat": (QUESTIONS, 39, 2554),
    "chitchat-may": (BENCH / "data" / "chitchat_may_questions.json", 45, 2782),
    "chitchat-apr": (BENCH / "data" / "chitchat_apr_questions.json", 27, 1844),
}
KINDS = {"single-hop", "multi-hop", "temporal", "paraphrase"}


@pytest.fixture(scope="module")
def sets() -> Iterator[ModuleType]:
    with bench_module("memory_sets") as module:
        yield module


@pytest.fixture(scope="module")
def data(sets: ModuleType) -> dict[str, Any]:
    path = sets.chitchat_data()
    if path is None or not path.is_file():
        pytest.skip("chitchat-dataset not installed and EMBER_BENCH_CHITCHAT not set")
    return dict(json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", STORES)
def test_the_questions_file_is_well_formed(name: str) -> None:
    path, n_conversations, _ = STORES[name]
    doc = json.loads(path.read_text())
    conversations = doc["conversations"]
    assert len(conversations) == len(set(conversations)) == n_conversations
    assert doc["source"]["licence"] == "MIT"
    assert len(doc["questions"]) >= 50
    for i, q in enumerate(doc["questions"]):
        assert q["kind"] in KINDS, i
        assert q["evidence"], i
        for e in q["evidence"]:
            assert e["conversation"] in conversations, i
            assert isinstance(e["message"], int) and e["message"] >= 0, i
            assert e["contains"].strip(), i
        if q["kind"] == "multi-hop":
            assert len({(e["conversation"], e["message"]) for e in q["evidence"]}) >= 2, i


@pytest.mark.parametrize("name", STORES)
def test_every_evidence_item_resolves_to_a_real_turn(
    sets: ModuleType, data: dict[str, Any], name: str
) -> None:
    path, _, n_turns = STORES[name]
    assert sets.CHITCHAT_SETS[name] == path
    doc = json.loads(path.read_text())
    turns = sets.chitchat_turns(data, doc["conversations"])
    assert len(turns) == n_turns
    assert len({t.id for t in turns}) == len(turns)
    every = sets.chitchat_questions(turns, None, path)  # raises on an evidence that misses
    assert len(every) == len(doc["questions"])
    dev = sets.chitchat_questions(turns, "dev", path)
    test = sets.chitchat_questions(turns, "test", path)
    assert [q.question for q in dev] == [q.question for q in every[0::2]]
    assert [q.question for q in test] == [q.question for q in every[1::2]]


@pytest.mark.parametrize(
    ("name", "first_day"),
    [
        ("chitchat", 1_538_352_000),  # 2018-10-01
        ("chitchat-may", 1_525_132_800),  # 2018-05-01
        ("chitchat-apr", 1_522_540_800),  # 2018-04-01
    ],
)
def test_the_set_is_one_store_dated_by_the_data(
    sets: ModuleType, data: dict[str, Any], name: str, first_day: int
) -> None:
    es = sets.chitchat("test", sets.chitchat_data(), name)
    assert es is not None and es.name == name
    ids = {t.id for t in es.turns}
    assert all(q.evidence <= ids for q in es.questions)
    # Real timestamps, not synthetic days.
    assert first_day <= min(t.created_at for t in es.turns) < first_day + 31 * 86_400
    assert max(t.created_at for t in es.turns) < es.now
    conversations = json.loads(STORES[name][0].read_text())["conversations"]
    assert {t.session for t in es.turns} == set(conversations)


def test_the_stores_share_no_conversation_and_all_are_measured(sets: ModuleType) -> None:
    seen: set[str] = set()
    for name in STORES:
        conversations = set(json.loads(STORES[name][0].read_text())["conversations"])
        assert not conversations & seen, name
        seen |= conversations
    assert set(sets.CHITCHAT_SETS) == set(STORES)
    assert set(STORES) >= sets.HELD_OUT


def test_a_wrong_contains_is_an_error(sets: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:  # fmt: skip
    doc = {
        "conversations": ["c"],
        "questions": [
            {"question": "q", "kind": "single-hop",
             "evidence": [{"conversation": "c", "message": 0, "contains": "absent"}]},
        ],
    }  # fmt: skip
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(sets, "CHITCHAT_QUESTIONS", path)
    turns = [sets.Turn("c:0", "hello there", 0.0)]
    with pytest.raises(ValueError, match="does not hold 'absent'"):
        sets.chitchat_questions(turns)


def test_without_data_the_set_is_skipped(sets: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:  # fmt: skip
    monkeypatch.setenv("EMBER_BENCH_CHITCHAT", str(tmp_path / "missing.json"))
    assert sets.chitchat("dev") is None
    assert "chitchat: skipped" in capsys.readouterr().err
