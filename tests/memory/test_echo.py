"""No echo (pure): which hits are already in the asking conversation."""

from __future__ import annotations

from typing import Any

from ember.memory.echo import not_echoed, provenance
from ember.memory.models import Memory, MemoryHit


def hit(memory_id: str, **metadata: Any) -> MemoryHit:
    memory = Memory(memory_id, f"fact {memory_id}", 0.0, 0.0, metadata=metadata)
    return MemoryHit(memory, score=0.5, similarity=0.5, lexical=None, recency=1.0)


def ids(hits: list[MemoryHit]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_fact_learned_in_the_asking_session_is_left_out() -> None:
    hits = [hit("a", session="s1"), hit("b", session="s2"), hit("c")]
    assert ids(not_echoed(hits, "s1", set)) == ["b", "c"]


def test_a_fact_whose_evidence_the_conversation_holds_is_left_out() -> None:
    hits = [
        hit("a", session="s2", evidence_digests=["d1"]),
        hit("b", session="s2", evidence_digests=["d9"]),
    ]
    assert ids(not_echoed(hits, "s3", lambda: {"d1", "d2"})) == ["b"]


def test_the_conversation_is_digested_once_and_only_when_needed() -> None:
    calls: list[int] = []

    def context() -> set[str]:
        calls.append(1)
        return set()

    assert ids(not_echoed([hit("a"), hit("b", session="s2")], "s1", context)) == ["a", "b"]
    assert calls == []
    many = [hit(str(i), session="s2", evidence_digests=["x"]) for i in range(5)]
    assert len(not_echoed(many, "s1", context)) == 5 and calls == [1]


def test_provenance_keeps_the_metadata_and_adds_sorted_digests_once() -> None:
    meta = provenance({"source": "shadow", "session": "s"}, ["b", "a", "b"])
    assert meta == {"source": "shadow", "session": "s", "evidence_digests": ["a", "b"]}
    assert provenance({"session": "s"}, []) == {"session": "s"}
