"""memory_save: facts, entities and relationships from one tool call."""

from __future__ import annotations

import json

import pytest

from ember.memory import (
    MEMORY_SAVE_SCHEMA,
    Evidence,
    HierarchicalMemory,
    MemoryInputError,
    SavePayload,
    rows,
)
from tests.memory.conftest import RawSql


def test_one_call_stores_facts_entities_and_relationships(store: HierarchicalMemory) -> None:
    payload = SavePayload.parse(
        {
            "facts": [
                {
                    "content": "The api-server depends on Postgres 16",
                    "importance": 0.8,
                    "category": "environment",
                    "entities": ["api-server"],
                },
                {"content": "Alice owns the billing service"},
            ],
            "entities": [{"name": "api-server", "type": "service"}, {"name": "Postgres"}],
            "relationships": [
                {"source": "api-server", "relation": "depends on", "target": "Postgres"}
            ],
        }
    )
    result = store.save(payload, session_id="s1", evidence=[Evidence("user-stated", "m4")])
    assert [m.content for m in result.memories] == [f.content for f in payload.facts]
    assert set(result.entities) == {"api-server", "Postgres"} and result.relationships == 1
    assert rows.relationships(RawSql(store)) == [("api-server", "depends on", "Postgres")]
    linked = (
        RawSql(store)
        .execute(
            "SELECT e.name FROM memory_entity_links l JOIN memory_entities e ON e.id=l.entity_id "
            "JOIN memories m ON m.seq=l.memory_seq WHERE m.id=? ORDER BY e.name",
            (result.memories[0].id,),
        )
        .fetchall()
    )
    assert {r[0] for r in linked} == {"Postgres", "api-server"}  # listed, and named in the text
    assert store.evidence(result.memories[0].id) == [Evidence("user-stated", "m4")]
    # importance 0.8 in a session: bubbled like any add
    assert any(m.promoted_from == result.memories[0].id for m in store.list())
    # saving the same again dedups instead of duplicating
    again = store.save(payload, session_id="s1")
    assert [m.id for m in again.memories] == [m.id for m in result.memories]


def test_bad_payloads_name_the_field() -> None:
    with pytest.raises(MemoryInputError, match="facts"):
        SavePayload.parse({"facts": []})
    with pytest.raises(MemoryInputError, match=r"facts\.0\.importance"):
        SavePayload.parse({"facts": [{"content": "x", "importance": 3}]})


def test_the_tool_schema_is_constant_json() -> None:
    first = json.dumps(MEMORY_SAVE_SCHEMA, sort_keys=True)
    assert first == json.dumps(MEMORY_SAVE_SCHEMA, sort_keys=True)
    assert MEMORY_SAVE_SCHEMA["required"] == ["facts"]
