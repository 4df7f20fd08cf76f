"""The emulated model runs a command the user asks for, with the client's own shell tool.

``ember dev upstream`` answers most requests with a sentence; a real client driven through it
then never calls a tool, so nothing that happens to tool output (compression, traffic
learning) can be tried with Claude Code or Codex offline. With this reply function, a user
message holding ``run: `COMMAND` `` is answered with a call of the request's shell tool
(Claude Code's ``Bash``, Codex's ``shell`` / ``exec_command``, Gemini's
``run_shell_command``...) with that command, its arguments shaped as the tool's schema asks;
the request that brings the tool's result back is answered with a sentence. (A client's note
after the ask, a system-role message, is not where the ask is.)
"""

from __future__ import annotations

import re
from typing import Any

from ember.testing.replies import Reply

_RUN = re.compile(r"run: `([^`]+)`")
SHELL_TOOLS = ("Bash", "shell", "exec_command", "run_shell_command", "local_shell", "bash")


def command_replies(body: dict[str, Any], path: str) -> Reply | None:
    """The call of the shell tool for a ``run: `...` `` ask; a sentence once its result is
    back; None for any other request."""
    conversation = body.get("messages") or body.get("input") or body.get("contents") or []
    if not isinstance(conversation, list) or not conversation:
        return None
    turn = [m for m in conversation if not (isinstance(m, dict) and m.get("role") == "system")]
    if not turn:
        return None
    last = turn[-1]
    if _is_tool_result(last):
        return Reply("The command finished; its output is above.")
    m = None
    for item in reversed(turn):  # the user's latest messages (Codex puts its context last)
        if not isinstance(item, dict) or item.get("role") != "user" or _is_tool_result(item):
            break
        m = m or _RUN.search(_text(item))
    tool = _shell_tool(body.get("tools") or [])
    if m is None or tool is None:
        return None
    return Reply.tool_use(tool[0], _arguments(tool[1], m.group(1)))


def _is_tool_result(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if item.get("role") == "tool" or str(item.get("type", "")).endswith("_call_output"):
        return True
    content = item.get("content", item.get("parts"))  # a Gemini content has parts
    return isinstance(content, list) and any(
        isinstance(b, dict) and (b.get("type") == "tool_result" or "functionResponse" in b)
        for b in content
    )


def _text(item: Any) -> str:
    content = item.get("content", item.get("parts")) if isinstance(item, dict) else item
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def _shell_tool(tools: list[Any]) -> tuple[str, dict[str, Any]] | None:
    """(name, input schema) of the request's shell tool, if it offers one."""
    for t in tools:
        if not isinstance(t, dict):
            continue
        inner = t.get("function")
        declared = t.get("functionDeclarations")  # Gemini: several functions a tool
        fns = declared if isinstance(declared, list) else [inner if isinstance(inner, dict) else t]
        for fn in fns:
            name = fn.get("name") if isinstance(fn, dict) else None
            if name in SHELL_TOOLS:
                schema = (
                    fn.get("input_schema")
                    or fn.get("parameters")
                    or fn.get("parametersJsonSchema")
                    or {}
                )
                return name, schema if isinstance(schema, dict) else {}
    return None


def _arguments(schema: dict[str, Any], command: str) -> dict[str, Any]:
    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    if "cmd" in props:
        return {"cmd": command}
    spec = props.get("command")
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "array":
        return {"command": ["bash", "-lc", command]}
    return {"command": command}
