"""The hand-written questions of the ``chitchat`` evaluation set (bench/memory_sets.py) point
at real turns. The conversations are not in the repository: the checks that need them skip
unless the ``chitchat-dataset`` package is installed or ``EMBER_BENCH_CHITCHAT`` names its
dataset.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.bench.conftest import BENCH, bench_module

QUESTIONS = BENCH / "data" / "chitchat_questions.json"
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


def test_the_questions_file_is_well_formed() -> None:
    doc = json.loads(QUESTIONS.read_text())
    conversations = doc["conversations"]
    assert len(conversations) == len(set(conversations)) == 39
    assert doc["source"]["licence"] == "MIT"
    assert len(doc["questions"]) >= 80
    for i, q in enumerate(doc["questions"]):
        assert q["kind"] in KINDS, i
        assert q["evidence"], i
        for e in q["evidence"]:
            assert e["conversation"] in conversations, i
            assert isinstance(e["message"], int) and e["message"] >= 0, i
            assert e["contains"].strip(), i
        if q["kind"] == "multi-hop":
            assert len({(e["conversation"], e["message"]) for e in q["evidence"]}) >= 2, i


def test_every_evidence_item_resolves_to_a_real_turn(
    sets: ModuleType, data: dict[str, Any]
) -> None:
    doc = json.loads(QUESTIONS.read_text())
    turns = sets.chitchat_turns(data, doc["conversations"])
    assert len(turns) == 2554
    assert len({t.id for t in turns}) == len(turns)
    every = sets.chitchat_questions(turns)  # raises on the first evidence that does not resolve
    assert len(every) == len(doc["questions"])
    dev = sets.chitchat_questions(turns, "dev")
    test = sets.chitchat_questions(turns, "test")
    assert [q.question for q in dev] == [q.question for q in every[0::2]]
    assert [q.question for q in test] == [q.question for q in every[1::2]]


def test_the_set_is_one_store_dated_by_the_data(sets: ModuleType, data: dict[str, Any]) -> None:
    es = sets.chitchat("test", sets.chitchat_data())
    assert es is not None and es.name == "chitchat"
    ids = {t.id for t in es.turns}
    assert all(q.evidence <= ids for q in es.questions)
    # Real timestamps (October-November 2018), not synthetic days.
    assert min(t.created_at for t in es.turns) >= 1_538_352_000  # 2018-10-01
    assert max(t.created_at for t in es.turns) < es.now
    assert {t.session for t in es.turns} == set(json.loads(QUESTIONS.read_text())["conversations"])


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
