"""Properties of shaping over generated request bodies, for all three wire formats.

For any body a client could send (any key order, whitespace, escapes) and any level:
- shaping is idempotent: shaping a shaped body gives the same bytes;
- an existing ember block is replaced, never duplicated;
- no effort field is created (a verbosity only for the gpt-5 family), none goes up;
- ``thinking.type`` is never changed;
- every pre-existing byte of system, tools and messages is preserved, except the one block
  ember owns.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from ember.protocols.base import ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc, locate
from ember.shaping.apply import apply_effort, apply_verbosity
from ember.shaping.policy import (
    ANTHROPIC_EFFORT_RANK,
    OPENAI_EFFORT_RANK,
    VERBOSITY_RANK,
    can_create_verbosity,
    classify_turn,
    plan_effort,
)
from ember.shaping.verbosity import steering_text
from tests.shaping.bodies import anthropic_bodies, chat_bodies, responses_bodies, serialised

CASES = [
    pytest.param(ANTHROPIC, anthropic_bodies(), id="anthropic"),
    pytest.param(OPENAI_CHAT, chat_bodies(), id="chat"),
    pytest.param(OPENAI_RESPONSES, responses_bodies(), id="responses"),
]
levels = st.integers(0, 4)
targets = st.sampled_from(["minimal", "low", "medium", "high"])
EXAMPLES = settings(max_examples=150, deadline=None)


def shape(adapter: ProtocolAdapter, raw: bytes, level: int, target: str = "low") -> bytes:
    """What the stage does to a treatment request, minus its per-session state: the block,
    then the effort plan (with the legacy budget clamp allowed, the most invasive case)."""
    doc = JsonDoc(raw)
    apply_verbosity(adapter, doc, level)
    plan = plan_effort(
        classify_turn(adapter.turn_parts(doc.value)),
        adapter.effort_fields(doc.value),
        protocol=adapter.name,
        model=adapter.model(doc.value),
        target=target,
        clamp_budget=True,
    )
    apply_effort(adapter, doc, plan)
    return doc.to_bytes()


def span(raw: bytes, *path: str | int) -> str:
    text = raw.decode("utf-8")
    start, end = locate(text, list(path))
    return text[start:end]


def get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


@pytest.mark.parametrize(("adapter", "bodies"), CASES)
@EXAMPLES
@given(data=st.data())
def test_shaping_twice_gives_the_same_bytes(
    adapter: ProtocolAdapter, bodies: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    raw = data.draw(serialised(bodies))
    level, target = data.draw(levels), data.draw(targets)
    once = shape(adapter, raw, level, target)
    assert shape(adapter, once, level, target) == once


@pytest.mark.parametrize(("adapter", "bodies"), CASES)
@EXAMPLES
@given(data=st.data())
def test_an_existing_block_is_replaced_never_duplicated(
    adapter: ProtocolAdapter, bodies: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    raw = data.draw(serialised(bodies))
    first, second = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    assert shape(adapter, shape(adapter, raw, first), second) == shape(adapter, raw, second)


#: Effort-like fields per format, with the scale a value is ranked on.
FIELDS: dict[str, list[tuple[tuple[str, ...], Any]]] = {
    "anthropic": [(("output_config", "effort"), ANTHROPIC_EFFORT_RANK)],
    "openai_chat": [
        (("reasoning_effort",), OPENAI_EFFORT_RANK),
        (("reasoning", "effort"), OPENAI_EFFORT_RANK),
        (("verbosity",), VERBOSITY_RANK),
    ],
    "openai_responses": [
        (("reasoning", "effort"), OPENAI_EFFORT_RANK),
        (("text", "verbosity"), VERBOSITY_RANK),
    ],
}


@pytest.mark.parametrize(("adapter", "bodies"), CASES)
@EXAMPLES
@given(data=st.data())
def test_no_effort_field_is_created_and_none_goes_up(
    adapter: ProtocolAdapter, bodies: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    raw = data.draw(serialised(bodies))
    before = json.loads(raw)
    after = json.loads(shape(adapter, raw, data.draw(levels), data.draw(targets)))
    for path, rank in FIELDS[adapter.name]:
        old, new = get(before, *path), get(after, *path)
        if old is None:
            creatable = path[-1] == "verbosity" and can_create_verbosity(before["model"])
            assert new is None or (creatable and new == "low"), (path, new)
        elif old != new:
            assert old in rank and new in rank and rank[new] < rank[old], (path, old, new)


@EXAMPLES
@given(raw=serialised(anthropic_bodies()), level=levels)
def test_thinking_type_is_never_changed(raw: bytes, level: int) -> None:
    before = json.loads(raw)
    after = json.loads(shape(ANTHROPIC, raw, level))
    old, new = before.get("thinking"), after.get("thinking")
    assert (old is None) == (new is None)
    if old is not None:
        assert new["type"] == old["type"]
        assert {k: v for k, v in new.items() if k != "budget_tokens"} == {
            k: v for k, v in old.items() if k != "budget_tokens"
        }
        if new.get("budget_tokens") != old.get("budget_tokens"):
            assert old["type"] == "enabled" and new["budget_tokens"] == 1024 < old["budget_tokens"]


def _block(level: int) -> str:
    block = steering_text(level)
    assert block is not None
    return block


@EXAMPLES
@given(raw=serialised(anthropic_bodies()), level=levels)
def test_anthropic_keeps_every_client_byte_but_its_own_block(raw: bytes, level: int) -> None:
    out = shape(ANTHROPIC, raw, level)
    before, after = json.loads(raw), json.loads(out)
    for key in ("tools", "messages", "metadata"):
        if key in before:
            assert span(out, key) == span(raw, key)
    system = before.get("system")
    if level == 0:
        assert after.get("system") == system
    elif isinstance(system, list):
        assert span(out, "system").startswith(span(raw, "system")[:-1])
        assert after["system"] == [*system, {"type": "text", "text": _block(level)}]
    else:
        head = [] if system is None else [{"type": "text", "text": system}]
        assert after["system"] == [*head, {"type": "text", "text": _block(level)}]
    rest = ("system", "output_config", "thinking")
    assert {k: v for k, v in after.items() if k not in rest} == {
        k: v for k, v in before.items() if k not in rest
    }


def _appended(original: Any, new: Any, block: str) -> bool:
    if isinstance(original, str):
        return bool(new == (f"{original}\n\n{block}" if original else block))
    return bool(isinstance(original, list) and new == [*original, {"type": "text", "text": block}])


@EXAMPLES
@given(raw=serialised(chat_bodies()), level=levels)
def test_chat_keeps_every_client_byte_but_its_own_block(raw: bytes, level: int) -> None:
    out = shape(OPENAI_CHAT, raw, level)
    before, after = json.loads(raw), json.loads(out)
    changed = [
        i
        for i in range(len(before["messages"]))
        if span(out, "messages", i) != span(raw, "messages", i)
    ]
    assert len(changed) <= 1
    has_system = any(m["role"] in ("system", "developer") for m in before["messages"])
    assert len(changed) == (1 if level > 0 and has_system else 0)
    for i in changed:
        old, new = before["messages"][i], after["messages"][i]
        assert old["role"] in ("system", "developer")
        assert _appended(old["content"], new["content"], _block(level))
    if "tools" in before:
        assert span(out, "tools") == span(raw, "tools")
    rest = ("messages", "reasoning_effort", "reasoning", "verbosity")
    assert {k: v for k, v in after.items() if k not in rest} == {
        k: v for k, v in before.items() if k not in rest
    }


@EXAMPLES
@given(raw=serialised(responses_bodies()), level=levels)
def test_responses_keeps_every_client_byte_but_its_own_block(raw: bytes, level: int) -> None:
    out = shape(OPENAI_RESPONSES, raw, level)
    before, after = json.loads(raw), json.loads(out)
    for key in ("input", "tools"):
        if key in before:
            assert span(out, key) == span(raw, key)
    if level == 0:
        assert after.get("instructions") == before.get("instructions")
    else:
        old = before.get("instructions")
        assert _appended(old if old is not None else "", after["instructions"], _block(level))
    rest = ("instructions", "reasoning", "text")
    assert {k: v for k, v in after.items() if k not in rest} == {
        k: v for k, v in before.items() if k not in rest
    }
