"""The model ``bench/mcp_clients.py`` plays for the real clients: it must call each client's MCP
tool in the shape that client runs (a flat ``mcp__ember__`` tool for Claude Code, a call naming
the ``mcp__ember`` namespace for Codex), find the user's turn behind Claude Code's trailing
system message, and answer a tool's result. The bodies are cut down from what Claude Code
2.1.197 and Codex 0.171.0 sent through the proxy."""

from __future__ import annotations

from typing import Any

from tests.bench.conftest import bench_module

SAY = "Please remember this for the project: The staging database is called heron-7."

REMINDER = {"type": "text", "text": "<system-reminder>x</system-reminder>"}
CLAUDE: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "tools": [{"name": "Bash"}, {"name": "mcp__ember__memory_save"}],
    "messages": [
        {"role": "user", "content": [REMINDER, {"type": "text", "text": SAY}]},
        {"role": "system", "content": "Skills you can use: init, review"},
    ],
}


def _said(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


SEARCH_TOOL = {"type": "function", "name": "memory_search"}
CODEX: dict[str, Any] = {
    "model": "gpt-5.1",
    "tools": [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__ember", "tools": [SEARCH_TOOL]},
    ],
    "input": [_said("developer", "..."), _said("user", "Look it up in memory: staging db")],
}


def test_claude_code_gets_a_flat_tool_call_with_the_users_words() -> None:
    with bench_module("mcp_clients") as bench:
        reply = bench.model_reply(CLAUDE, "/v1/messages")
    (call,) = reply.tool_calls
    assert (call.name, call.namespace) == ("mcp__ember__memory_save", None)
    assert call.input == {
        "facts": [{"content": "The staging database is called heron-7.", "category": "convention"}],
        "user_stated": True,
    }


def test_codex_gets_a_call_naming_the_namespace() -> None:
    with bench_module("mcp_clients") as bench:
        reply = bench.model_reply(CODEX, "/v1/responses")
    (call,) = reply.tool_calls
    assert (call.name, call.namespace, call.input) == (
        "memory_search",
        "mcp__ember",
        {"query": "staging db"},
    )


def test_a_tools_result_is_answered_and_unlisted_tools_are_never_called() -> None:
    result = {"type": "function_call_output", "call_id": "c1", "output": '{"hits": ["heron-7"]}'}
    with bench_module("mcp_clients") as bench:
        answered = bench.model_reply({**CODEX, "input": [*CODEX["input"], result]}, "/v1/responses")
        without = bench.model_reply({**CLAUDE, "tools": [{"name": "Bash"}]}, "/v1/messages")
    assert not answered.tool_calls and "heron-7" in answered.text
    assert without is None  # the emulator's usual answer: a save the client cannot run
