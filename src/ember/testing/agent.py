"""A scripted coding agent that talks like Claude Code, for the demo, tests and benchmarks.

It drives the official ``anthropic`` SDK against any base URL (the proxy or the emulator
directly) and scripts the emulator so that every ask is answered by a few tool calls and then a
final text. On the wire it behaves like Claude Code: a long system prompt with an ``<env>``
block naming the working directory, tool definitions, a session id in ``metadata.user_id``, and
``cache_control`` on the last system block and on the last content block of the latest message
(the breakpoint moves forward every turn). Same inputs, same bytes: runs are reproducible, so
"with ember" and "without ember" can be compared turn by turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic

from ember.testing.emulator import Emulator
from ember.testing.replies import Reply

_EPHEMERAL = {"type": "ephemeral"}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "Read",
        "description": "Read a file from the local filesystem. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "Bash",
        "description": "Run a shell command and return its output. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "Edit",
        "description": "Replace a string in a file with another string. " * 20,
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old": {"type": "string"},
                "new": {"type": "string"},
            },
            "required": ["path", "old", "new"],
        },
    },
]


def system_prompt(cwd: str) -> list[dict[str, Any]]:
    rules = " ".join(
        f"Rule {i}: prefer small, reviewed changes and run the tests after each edit."
        for i in range(60)
    )
    return [
        {"type": "text", "text": "You are an interactive coding agent. " + rules},
        {
            "type": "text",
            "text": f"<env>\nWorking directory: {cwd}\nPlatform: linux\n</env>",
            "cache_control": _EPHEMERAL,
        },
    ]


@dataclass(frozen=True)
class Task:
    """One user ask: the tool calls the model makes for it, then its final answer.

    ``ember_tool_calls`` are calls to tools ember offers and runs itself (the memory tools):
    the model makes them first, the agent never sees them.
    """

    ask: str
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = ()
    answer: str = "Done."
    ember_tool_calls: Sequence[tuple[str, dict[str, Any]]] = ()


@dataclass
class TurnUsage:
    turn: int
    kind: str  # "ask" or "tool_result"
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int


@dataclass
class ScriptedAgent:
    client: anthropic.Anthropic
    emulator: Emulator | None
    cwd: str = "/home/dev/acme-api"
    session_id: str = "0a1b2c3d-0000-4000-8000-000000000001"
    model: str = "claude-sonnet-4-5"
    history: list[dict[str, Any]] = field(default_factory=list)
    usage: list[TurnUsage] = field(default_factory=list)
    #: sent on every request when set, as Claude Code pins them: e.g. ``{"type": "enabled",
    #: "budget_tokens": 8000}`` and ``{"effort": "high"}``
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None

    def run(self, tasks: Sequence[Task]) -> list[TurnUsage]:
        for task in tasks:
            self._script(task)
            self._send({"role": "user", "content": [{"type": "text", "text": task.ask}]}, "ask")
            for _ in task.tool_calls:
                calls = [b for b in self.history[-1]["content"] if b["type"] == "tool_use"]
                results = [
                    {
                        "type": "tool_result",
                        "tool_use_id": b["id"],
                        "content": _fake_tool_output(b["name"], b["input"]),
                    }
                    for b in calls
                ]
                self._send({"role": "user", "content": results}, "tool_result")
        return self.usage

    def _script(self, task: Task) -> None:
        if self.emulator is None:
            return
        hidden = [Reply("", [(name, args)]) for name, args in task.ember_tool_calls]
        replies = [Reply(f"Let me use {name}.", [(name, args)]) for name, args in task.tool_calls]
        self.emulator.script(*hidden, *replies, Reply(task.answer))

    def _send(self, user_message: dict[str, Any], kind: str) -> None:
        self.history.append(user_message)
        options: dict[str, Any] = {}
        if self.thinking is not None:
            options["thinking"] = self.thinking
        if self.output_config is not None:
            options["output_config"] = self.output_config
        msg = self.client.messages.create(  # type: ignore[call-overload]
            model=self.model,
            max_tokens=4096,
            system=system_prompt(self.cwd),
            tools=TOOLS,
            messages=_with_moving_breakpoint(self.history),
            metadata={"user_id": f"user_demo_account_demo_session_{self.session_id}"},
            **options,
        )
        self.history.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
        )
        u = msg.usage
        self.usage.append(
            TurnUsage(
                len(self.usage) + 1,
                kind,
                u.input_tokens,
                u.cache_read_input_tokens or 0,
                u.cache_creation_input_tokens or 0,
                u.output_tokens,
            )
        )


def _with_moving_breakpoint(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with ``cache_control`` on the last block of the last message only."""
    out = [dict(m) for m in history]
    last = dict(out[-1])
    blocks = [dict(b) for b in last["content"]]
    blocks[-1]["cache_control"] = _EPHEMERAL
    last["content"] = blocks
    out[-1] = last
    return out


def _fake_tool_output(name: str, args: dict[str, Any]) -> str:
    if name == "Read":
        return "\n".join(f"{i:4} | line {i} of {args.get('path')}" for i in range(1, 40))
    if name == "Bash":
        return f"$ {args.get('command')}\n" + "collected 42 items\n" + "." * 42 + "\n42 passed"
    return json.dumps({"ok": True, **args})


def demo_tasks() -> list[Task]:
    return [
        Task(
            "The login endpoint returns 500 when the password is empty. Find out why.",
            [
                ("Read", {"path": "src/auth/login.py"}),
                ("Bash", {"command": "pytest tests/test_login.py -q"}),
            ],
            "The handler indexes password[0] before validating it; an empty string raises.",
        ),
        Task(
            "Fix it and add a regression test.",
            [
                (
                    "Edit",
                    {"path": "src/auth/login.py", "old": "password[0]", "new": "password[:1]"},
                ),
                ("Bash", {"command": "pytest -q"}),
            ],
            "Fixed: the check now tolerates an empty password, and a test covers it.",
        ),
        Task(
            "Thanks. Summarise what changed in one line.",
            [],
            "Empty passwords now get a 400 instead of crashing the login handler.",
        ),
    ]


def session_tasks(requests: int) -> list[Task]:
    """Tasks that make exactly ``requests`` requests (asks plus tool-result turns), for long
    sessions: asks with 2, 3, 1, 0 and 2 tool calls in turn, reading files and running tests."""
    tasks: list[Task] = []
    left, i = requests, 0
    shapes = (2, 3, 1, 0, 2)
    while left > 0:
        calls = min(shapes[i % len(shapes)], left - 1)
        tools: list[tuple[str, dict[str, Any]]] = [
            ("Read", {"path": f"src/module_{i}/part_{j}.py"})
            if j % 2 == 0
            else ("Bash", {"command": f"pytest tests/test_module_{i}.py -q"})
            for j in range(calls)
        ]
        tasks.append(
            Task(
                f"Step {i}: module {i} has a failing check. Find the cause and fix it.",
                tools,
                f"Module {i}: the check compared against a stale constant; it now reads the "
                f"configured value, and the tests for module {i} pass.",
            )
        )
        left -= calls + 1
        i += 1
    return tasks
