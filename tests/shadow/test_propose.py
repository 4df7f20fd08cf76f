"""The resident memory_propose tool and its policy, on their own (pure).

The definitions are checked against the official SDKs' own request types and the input schema
against the JSON Schema meta-schema; the schema must accept exactly the batches ember's
validation accepts, or a model that follows it would see its proposals rejected.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from anthropic.types import ToolParam
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from ember.shadow.models import parse_facts
from ember.shadow.propose import (
    INPUT_SCHEMA,
    MEMORY_PROPOSE,
    OUTSIDE_SHADOW,
    guard_tool_call,
    memory_propose_tool,
    tool_call_refusal,
)

SDK_TYPES: dict[str, Any] = {
    "anthropic": ToolParam,
    "openai_chat": ChatCompletionFunctionToolParam,
    "openai_responses": FunctionToolParam,
}

GOOD = {
    "facts": [
        {
            "content": "Releases deploy to eu-west-1 on tags.",
            "category": "deploy",
            "evidence": [{"kind": "user-stated", "messageId": "m0123456789ab"}],
        },
        {
            "content": "The test suite passes on Python 3.12.",
            "evidence": [{"kind": "observed-outcome", "sessionId": "sess-1"}],
        },
    ]
}


def keys_of(typed_dict: Any) -> set[str]:
    return set(typed_dict.__required_keys__) | set(typed_dict.__optional_keys__)


@pytest.mark.parametrize("protocol", sorted(SDK_TYPES))
def test_the_definition_is_a_valid_tool_of_each_wire_format(protocol: str) -> None:
    definition = memory_propose_tool(protocol)
    sdk_type = SDK_TYPES[protocol]
    TypeAdapter(sdk_type).validate_python(definition)
    assert set(definition) <= keys_of(sdk_type), "a key the SDK does not know"
    schema = definition.get("input_schema") or definition.get("parameters")
    if schema is None:  # Chat nests it under "function"
        fn = definition["function"]
        assert fn["name"] == MEMORY_PROPOSE
        schema = fn["parameters"]
    else:
        assert definition["name"] == MEMORY_PROPOSE
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == INPUT_SCHEMA


@pytest.mark.parametrize("protocol", sorted(SDK_TYPES))
def test_the_definition_serialises_to_the_same_bytes_every_time(protocol: str) -> None:
    """Tools come first in the cached prompt: one byte of drift re-bills the whole prefix."""
    first = memory_propose_tool(protocol)
    first["description"] = "edited by a careless caller"
    again = [json.dumps(memory_propose_tool(protocol)) for _ in range(3)]
    assert len(set(again)) == 1 and "careless" not in again[0]


def test_the_schema_accepts_exactly_what_ember_validates() -> None:
    validator = jsonschema.Draft202012Validator(INPUT_SCHEMA)
    validator.validate(GOOD)
    assert all(f.error is None for f in parse_facts(GOOD))
    bad_batches = [
        {"facts": [{"content": "x", "evidence": []}]},  # no evidence
        {"facts": [{"content": "x", "evidence": [{"kind": "guessed", "messageId": "m1"}]}]},
        {"facts": [{"content": "", "evidence": [{"kind": "user-stated", "messageId": "m1"}]}]},
        {
            "facts": [
                {
                    "content": "x",
                    "evidence": [{"kind": "user-stated", "messageId": "m1"}],
                    "confidence": 0.9,
                }
            ]
        },
        {},
    ]
    for batch in bad_batches:
        assert not validator.is_valid(batch), batch
        if "facts" in batch:
            assert all(f.error is not None for f in parse_facts(batch)), batch


def test_an_unknown_wire_format_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="use one of anthropic, openai_chat, openai_responses"):
        memory_propose_tool("gemini")


def test_memory_propose_is_refused_outside_a_shadow_turn_and_allowed_inside() -> None:
    assert tool_call_refusal(MEMORY_PROPOSE, shadow_turn=False) == OUTSIDE_SHADOW
    assert tool_call_refusal(MEMORY_PROPOSE, shadow_turn=True) is None
    # Symmetric: a normal turn runs its tools, a shadow turn runs none but memory_propose.
    assert tool_call_refusal("bash", shadow_turn=False) is None
    refusal = tool_call_refusal("bash", shadow_turn=True)
    assert refusal is not None and "bash is refused" in refusal


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [
        (
            "anthropic",
            {"type": "tool_result", "tool_use_id": "c1", "content": OUTSIDE_SHADOW,
             "is_error": True},
        ),
        ("openai_chat", {"role": "tool", "tool_call_id": "c1", "content": OUTSIDE_SHADOW}),
        (
            "openai_responses",
            {"type": "function_call_output", "call_id": "c1", "output": OUTSIDE_SHADOW},
        ),
    ],
)  # fmt: skip
def test_a_refused_call_gets_an_explanatory_result_in_its_wire_format(
    protocol: str, expected: dict[str, Any]
) -> None:
    assert guard_tool_call(protocol, MEMORY_PROPOSE, "c1") == expected
    assert guard_tool_call(protocol, MEMORY_PROPOSE, "c1", shadow_turn=True) is None
    assert guard_tool_call(protocol, "read_file", "c1") is None
