"""Compression over OpenAI's wire formats, with the official openai SDK as the client: a Chat
``tool`` message and a Responses ``function_call_output`` are shortened the first time, replayed
after, and a streamed answer that retrieves stays one answer the client can read."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ember.testing.replies import Reply
from ember.testing.tool_outputs import build_log, pytest_log
from tests.conftest import Stack, StackFactory

HEADERS = {"x-ember-project-id": "shop", "x-ember-session-id": "openai-compress-1"}
SHELL = {"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    return make_stack(stages="features", shadow="off", memory_mode="off")


def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=stack.url + "/v1", api_key="k", max_retries=0, default_headers=HEADERS
    )


def test_a_chat_tool_message_is_shortened_replayed_and_retrievable(stack: Stack) -> None:
    log = pytest_log()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the tests."}]
    stack.emulator.script(Reply.tool_use("shell", {"command": "pytest -v"}))
    with client(stack) as c:
        first = c.chat.completions.create(model="gpt-5", messages=messages, tools=[SHELL])
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": log.text})
        stack.emulator.script(Reply("One test fails."))
        c.chat.completions.create(model="gpt-5", messages=messages, tools=[SHELL])
        sent = json.loads(stack.emulator.requests[-1].body)["messages"][-1]["content"]
        assert len(sent) < len(log.text) / 5 and all(k in sent for k in log.must_keep)
        ref = sent.split("ember_retrieve ref=")[1].split()[0]
        messages.append({"role": "assistant", "content": "One test fails."})
        messages.append({"role": "user", "content": "Show the first lines of the log."})
        stack.emulator.script(
            Reply.tool_use("ember_retrieve", {"ref": ref, "lines": "1-3"}, text="Looking."),
            Reply("Here they are."),
        )
        with c.chat.completions.stream(model="gpt-5", messages=messages, tools=[SHELL]) as s:
            final = s.get_final_completion().choices[0].message
    assert not final.tool_calls and final.content == "Looking.Here they are."
    hidden = json.loads(stack.emulator.requests[-1].body)["messages"]
    assert hidden[-1]["role"] == "tool"
    assert hidden[-1]["content"] == "\n".join(log.text.split("\n")[:3])
    assert next(m.get("content") for m in hidden if m["role"] == "tool") == sent  # replayed


def test_a_responses_output_is_shortened_and_a_streamed_retrieval_is_one_response(
    stack: Stack,
) -> None:
    build = build_log()
    tools: Any = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "Build it."}]
    stack.emulator.script(Reply.tool_use("shell", {"command": "cargo build"}))
    with client(stack) as c:
        first = c.responses.create(model="gpt-5", input=items, tools=tools)  # type: ignore[arg-type]
        call = next(o for o in first.output if o.type == "function_call")
        items += [
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": "shell",
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": build.text},
        ]
        stack.emulator.script(Reply("Three warnings."))
        c.responses.create(model="gpt-5", input=items, tools=tools)  # type: ignore[arg-type]
        sent = json.loads(stack.emulator.requests[-1].body)["input"][-1]["output"]
        assert len(sent) < len(build.text) / 3 and all(k in sent for k in build.must_keep)
        ref = sent.split("ember_retrieve ref=")[1].split()[0]
        items += [
            {"role": "assistant", "content": "Three warnings."},
            {"role": "user", "content": "What is on line 100?"},
        ]
        stack.emulator.script(
            Reply.tool_use("ember_retrieve", {"ref": ref, "lines": "100"}), Reply("A compile step.")
        )
        with c.responses.stream(model="gpt-5", input=items, tools=tools) as s:  # type: ignore[arg-type]
            final = s.get_final_response()
    assert final.output_text == "A compile step."
    assert all(getattr(o, "name", None) != "ember_retrieve" for o in final.output)


def test_a_ten_megabyte_output_is_answered_and_shortened(stack: Stack) -> None:
    huge = "\n".join(f"step {i} ok" for i in range(900_000)) + "\nError: the one failure"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the job."}]
    stack.emulator.script(Reply.tool_use("shell", {"command": "./job.sh"}), Reply("It failed."))
    with client(stack) as c:
        first = c.chat.completions.create(model="gpt-5", messages=messages, tools=[SHELL])
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": huge})
        answer = c.chat.completions.create(model="gpt-5", messages=messages, tools=[SHELL])
    assert answer.choices[0].message.content == "It failed."
    sent = json.loads(stack.emulator.requests[-1].body)["messages"][-1]["content"]
    assert "Error: the one failure" in sent and len(sent) < 10_000
