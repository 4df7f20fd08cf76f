"""The emulated model runs the command a user asks for with the client's own shell tool."""

from __future__ import annotations

from ember.testing.commands import command_replies

ASK = {"role": "user", "content": [{"type": "text", "text": "Please run: `python3 gen.py`"}]}


def tools(name: str, props: dict[str, object]) -> list[dict[str, object]]:
    return [{"name": name, "input_schema": {"type": "object", "properties": props}}]


def test_the_shell_tool_is_called_with_arguments_shaped_as_its_schema_asks() -> None:
    claude = command_replies(
        {"messages": [ASK], "tools": tools("Bash", {"command": {"type": "string"}})}, ""
    )
    assert claude is not None and claude.tool_calls[0].name == "Bash"
    assert claude.tool_calls[0].input == {"command": "python3 gen.py"}
    codex = command_replies(
        {
            "input": [ASK],
            "tools": [
                {
                    "type": "function",
                    "name": "shell",
                    "parameters": {"properties": {"command": {"type": "array"}}},
                }
            ],
        },
        "",
    )
    assert codex is not None and codex.tool_calls[0].input == {
        "command": ["bash", "-lc", "python3 gen.py"]
    }
    exec_command = command_replies(
        {"input": [ASK], "tools": tools("exec_command", {"cmd": {}})}, ""
    )
    assert exec_command is not None and exec_command.tool_calls[0].input == {
        "cmd": "python3 gen.py"
    }


def test_the_result_gets_a_sentence_and_other_asks_nothing() -> None:
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}],
    }
    done = command_replies({"messages": [ASK, {"role": "assistant", "content": "x"}, result]}, "")
    assert done is not None and not done.tool_calls
    plain = {"role": "user", "content": "hello"}
    assert command_replies({"messages": [plain], "tools": tools("Bash", {})}, "") is None
    assert command_replies({"messages": [ASK], "tools": tools("Read", {})}, "") is None
    note = {"role": "system", "content": "a client's note"}
    assert command_replies({"messages": [ASK, note], "tools": tools("Bash", {})}, "") is not None
