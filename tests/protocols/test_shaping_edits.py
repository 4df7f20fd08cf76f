"""The adapters' reads and edits for output shaping: turn structure, cache TTL, effort fields,
ember's own system block."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, edits
from ember.protocols.content import find_region, structured_error, with_region
from ember.protocols.jsonedit import JsonDoc

OPEN, CLOSE = "<x>", "</x>"
BLOCK = "<x>be brief</x>"


def doc(body: dict[str, Any]) -> JsonDoc:
    return JsonDoc(json.dumps(body).encode())


def sent(d: JsonDoc) -> Any:
    return json.loads(d.to_bytes())


# -- regions --------------------------------------------------------------------------------


def test_region_is_replaced_in_place_or_appended_after_a_blank_line() -> None:
    assert with_region("", OPEN, CLOSE, BLOCK) == BLOCK
    assert with_region("sys", OPEN, CLOSE, BLOCK) == "sys\n\n" + BLOCK
    assert with_region("sys\n\n<x>old</x>", OPEN, CLOSE, BLOCK) == "sys\n\n" + BLOCK
    assert with_region("a <x>b</x> c", OPEN, CLOSE, BLOCK) == "a " + BLOCK + " c"


def test_a_stray_client_tag_is_never_swallowed() -> None:
    text = "client wrote <x> here\n\n<x>old</x>"
    assert find_region(text, OPEN, CLOSE) == (text.rindex(OPEN), len(text))
    assert find_region("only <x> open", OPEN, CLOSE) is None


# -- turn structure -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "parts"),
    [
        ("hi", ("text",)),
        ([{"type": "tool_result", "tool_use_id": "a", "content": "ok"}], ("tool_result",)),
        (
            [{"type": "tool_result", "tool_use_id": "a", "content": "x", "is_error": True}],
            ("tool_error",),
        ),
        (
            [{"type": "tool_result", "tool_use_id": "a"}, {"type": "text", "text": "also"}],
            ("tool_result", "text"),
        ),
        ([{"type": "image", "source": {}}], ("image",)),
        ([{"type": "search_result"}], ("other",)),
    ],
)
def test_anthropic_turn_parts(content: Any, parts: tuple[str, ...]) -> None:
    assert ANTHROPIC.turn_parts({"messages": [{"role": "user", "content": content}]}) == parts


def test_anthropic_assistant_prefill_is_no_turn() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}]}
    assert ANTHROPIC.turn_parts(body) == ()
    assert ANTHROPIC.turn_parts({}) == ()


def test_chat_tool_messages_fail_only_by_structured_fields() -> None:
    failing = json.dumps({"output": "boom", "metadata": {"exit_code": 2}})
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": []},
            {"role": "tool", "tool_call_id": "a", "content": "Error: all fine, this is prose"},
            {"role": "tool", "tool_call_id": "b", "content": failing},
        ]
    }
    assert OPENAI_CHAT.turn_parts(body) == ("tool_result", "tool_error")
    body["messages"].append({"role": "user", "content": [{"type": "image_url"}]})
    assert OPENAI_CHAT.turn_parts(body) == ("image",)


def test_responses_outputs_and_messages() -> None:
    items: list[Any] = [
        {"type": "function_call", "call_id": "a", "name": "sh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": '{"success": false}'},
        {"type": "custom_tool_call_output", "call_id": "b", "output": "fine"},
    ]
    assert OPENAI_RESPONSES.turn_parts({"input": items}) == ("tool_error", "tool_result")
    assert OPENAI_RESPONSES.turn_parts({"input": "hello"}) == ("text",)
    items.append({"role": "user", "content": [{"type": "input_file", "file_id": "f"}]})
    assert OPENAI_RESPONSES.turn_parts({"input": items}) == ("document",)
    assert OPENAI_RESPONSES.turn_parts({"input": [{"type": "reasoning"}]}) == ()


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ('{"exit_code": 1}', True),
        ('{"exit_code": 0}', False),
        ('{"metadata": {"exit_code": 127}}', True),
        ('{"success": false}', True),
        ('{"error": "boom"}', True),
        ('{"error": null}', False),
        ({"is_error": True}, True),
        ("exit code 1: failed", False),  # prose is never read
        ("{not json", False),
    ],
)
def test_structured_error(output: Any, error: bool) -> None:
    assert structured_error(output) is error


# -- cache TTL ------------------------------------------------------------------------------


def test_cache_ttl() -> None:
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    assert ANTHROPIC.cache_ttl({"messages": []}) == 300
    assert ANTHROPIC.cache_ttl({"cache_control": one_hour}) == 3600
    assert ANTHROPIC.cache_ttl({"tools": [{"name": "a", "cache_control": one_hour}]}) == 3600
    nested = {"type": "tool_result", "content": [{"type": "text", "cache_control": one_hour}]}
    assert ANTHROPIC.cache_ttl({"messages": [{"role": "user", "content": [nested]}]}) == 3600
    assert OPENAI_CHAT.cache_ttl({"prompt_cache_retention": "24h"}) == 86400
    assert OPENAI_RESPONSES.cache_ttl({}) == 3600


# -- effort fields --------------------------------------------------------------------------


def test_anthropic_effort_edits_never_create_and_never_touch_thinking_type() -> None:
    bare = doc({"model": "m", "messages": []})
    assert not edits.set_effort(ANTHROPIC, bare, "low") and not edits.set_thinking_budget(
        ANTHROPIC, bare, 1
    )
    assert not bare.edited
    d = doc(
        {
            "output_config": {"effort": "high"},
            "thinking": {"type": "enabled", "budget_tokens": 9000},
        }
    )
    assert ANTHROPIC.effort_fields(d.value).thinking_budget == 9000
    assert edits.set_effort(ANTHROPIC, d, "low") and edits.set_thinking_budget(ANTHROPIC, d, 1024)
    assert sent(d) == {
        "output_config": {"effort": "low"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    assert not edits.set_verbosity(ANTHROPIC, d, "low")


def test_chat_effort_edits_the_field_it_reads_only() -> None:
    d = doc({"reasoning_effort": "high", "reasoning": {"effort": "low"}})
    assert OPENAI_CHAT.effort_fields(d.value).effort == "high"
    assert edits.set_effort(OPENAI_CHAT, d, "medium")
    assert sent(d) == {"reasoning_effort": "medium", "reasoning": {"effort": "low"}}
    assert not edits.set_effort(OPENAI_CHAT, doc({"model": "gpt-5"}), "low")


def test_responses_verbosity_is_created_without_touching_text_format() -> None:
    d = doc({"text": {"format": {"type": "json_schema"}}})
    assert edits.set_verbosity(OPENAI_RESPONSES, d, "low")
    assert d.to_bytes() == b'{"text": {"format": {"type": "json_schema"},"verbosity":"low"}}'
    created = doc({"model": "gpt-5"})
    assert edits.set_verbosity(OPENAI_RESPONSES, created, "low")
    assert sent(created) == {"model": "gpt-5", "text": {"verbosity": "low"}}
    assert not OPENAI_RESPONSES.effort_fields({"text": "odd"}).verbosity_creatable


# -- ember's system block -------------------------------------------------------------------


def test_anthropic_block_goes_after_the_last_system_block_keeping_breakpoints() -> None:
    raw = (
        b'{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],'
        b'"messages":[]}'
    )
    d = JsonDoc(raw)
    assert edits.put_system_block(ANTHROPIC, d, OPEN, CLOSE, BLOCK)
    assert d.to_bytes() == (
        b'{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},'
        b'{"type":"text","text":"<x>be brief</x>"}],"messages":[]}'
    )
    again = JsonDoc(d.to_bytes())
    assert not edits.put_system_block(ANTHROPIC, again, OPEN, CLOSE, BLOCK)  # idempotent, no edit
    assert edits.owned_system_block(ANTHROPIC, again.value, OPEN, CLOSE) == BLOCK
    assert edits.put_system_block(ANTHROPIC, again, OPEN, CLOSE, "<x>terser</x>")
    assert sent(again)["system"][-1] == {"type": "text", "text": "<x>terser</x>"}


def test_anthropic_string_or_missing_system() -> None:
    d = doc({"system": "sys", "messages": []})
    edits.put_system_block(ANTHROPIC, d, OPEN, CLOSE, BLOCK)
    assert sent(d)["system"] == [{"type": "text", "text": "sys"}, {"type": "text", "text": BLOCK}]
    d = doc({"messages": []})
    edits.put_system_block(ANTHROPIC, d, OPEN, CLOSE, BLOCK)
    assert sent(d)["system"] == [{"type": "text", "text": BLOCK}]
    d = doc({"system": 7})
    assert not edits.put_system_block(ANTHROPIC, d, OPEN, CLOSE, BLOCK) and not d.edited


def test_chat_block_goes_to_the_head_system_message() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "main"},
            {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "late reminder"},
        ]
    }
    d = doc(body)
    assert edits.put_system_block(OPENAI_CHAT, d, OPEN, CLOSE, BLOCK)
    out = sent(d)["messages"]
    assert out[1]["content"] == [{"type": "text", "text": "rules"}, {"type": "text", "text": BLOCK}]
    assert [out[0], out[2], out[3]] == [body["messages"][i] for i in (0, 2, 3)]
    assert not edits.put_system_block(
        OPENAI_CHAT, doc({"messages": [{"role": "user", "content": "x"}]}), OPEN, CLOSE, BLOCK
    )
    d = doc({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s"}]})
    edits.put_system_block(OPENAI_CHAT, d, OPEN, CLOSE, BLOCK)
    assert sent(d)["messages"][1]["content"] == "s\n\n" + BLOCK


def test_responses_block_goes_to_instructions() -> None:
    d = doc({"instructions": "be good", "input": "hi"})
    edits.put_system_block(OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK)
    assert sent(d)["instructions"] == "be good\n\n" + BLOCK
    d = doc({"input": "hi"})
    edits.put_system_block(OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK)
    assert sent(d) == {"input": "hi", "instructions": BLOCK}
    d = doc({"instructions": [{"role": "system", "content": "x"}]})
    assert not edits.put_system_block(OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK) and not d.edited


def test_responses_continuation_gets_the_block_only_in_its_own_instructions() -> None:
    """The continued response carries the block in its developer items: one in the new items'
    developer item (Codex's continuation opens with one) or in a new ``instructions`` would be
    a second copy in the model's prompt."""
    d = doc({"previous_response_id": "resp_1", "input": [{"role": "user", "content": "more"}]})
    assert not edits.put_system_block(OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK) and not d.edited
    developer = {"role": "developer", "content": [{"type": "input_text", "text": "skills"}]}
    d = doc(
        {"previous_response_id": "resp_1", "input": [developer, {"role": "user", "content": "x"}]}
    )
    assert not edits.put_system_block(OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK) and not d.edited
    d = doc({"previous_response_id": "resp_1", "instructions": "be good", "input": "more"})
    assert edits.put_system_block(
        OPENAI_RESPONSES, d, OPEN, CLOSE, BLOCK
    )  # its own prompt: as always
    assert sent(d)["instructions"] == "be good\n\n" + BLOCK
