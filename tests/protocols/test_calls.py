"""Tool-call arguments by call id, in each wire format, as the client sent them."""

from __future__ import annotations

from ember.protocols.anthropic import AnthropicAdapter
from ember.protocols.calls import tool_calls
from ember.protocols.openai_chat import OpenAIChatAdapter
from ember.protocols.openai_responses import OpenAIResponsesAdapter


def test_anthropic_tool_use_blocks() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "running"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
        ]
    }
    calls = tool_calls(AnthropicAdapter(), body)
    assert calls["t1"].name == "Bash" and calls["t1"].arguments == {"command": "ls"}


def test_chat_arguments_are_parsed_and_bad_json_is_kept_raw() -> None:
    body = {
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}},
                    {"id": "c2", "function": {"name": "shell", "arguments": "{not json"}},
                ],
            }
        ]
    }
    calls = tool_calls(OpenAIChatAdapter(), body)
    assert calls["c1"].arguments == {"cmd": "ls"}
    assert calls["c2"].arguments == {"_raw": "{not json"}


ARGS = '{"command": ["bash", "-lc", "ls"]}'


def test_responses_function_and_custom_calls() -> None:
    body = {
        "input": [
            {"type": "function_call", "call_id": "r1", "name": "shell", "arguments": ARGS},
            {"type": "local_shell_call", "call_id": "r2", "action": {"command": ["ls"]}},
            {"type": "function_call_output", "call_id": "r1", "output": "a b"},
        ]
    }  # fmt: skip
    calls = tool_calls(OpenAIResponsesAdapter(), body)
    assert calls["r1"].arguments == {"command": ["bash", "-lc", "ls"]}
    assert calls["r2"].name == "local_shell" and calls["r2"].arguments == {"command": ["ls"]}
    assert tool_calls(OpenAIResponsesAdapter(), "not an object") == {}
