"""Multi-turn agent sessions over the OpenAI SDKs, for end-to-end cache tests.

The Anthropic side uses ``ember.testing.agent.ScriptedAgent``; these are its OpenAI
counterparts: the same task lists, scripted the same way (tool calls, then an answer), with a
long stable system prompt so the emulator's automatic prompt cache (>= 1024 tokens) engages.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from ember.testing import Emulator, Reply
from ember.testing.agent import Task

SYSTEM = "You are a coding agent working in /home/dev/acme-api. " + " ".join(
    f"Guideline {i}: keep changes small, explain nothing twice, run the tests after edits."
    for i in range(120)
)
CHAT_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("Read", "Bash")
]
RESPONSES_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("Read", "Bash")
]


def _script(emulator: Emulator, task: Task) -> None:
    replies = [Reply(f"Using {n}.", [(n, args)]) for n, args in task.tool_calls]
    emulator.script(*replies, Reply(task.answer))


def _output(name: str) -> str:
    return json.dumps({"output": f"{name} ok\n" + "line\n" * 30, "metadata": {"exit_code": 0}})


def chat_session(
    client: openai.OpenAI, emulator: Emulator, tasks: list[Task], **options: Any
) -> list[int]:
    """Cached prompt tokens of every request of one Chat Completions session."""
    messages: list[dict[str, Any]] = [{"role": "developer", "content": SYSTEM}]
    cached: list[int] = []

    def send() -> Any:
        r = client.chat.completions.create(
            model="gpt-5", messages=messages, tools=CHAT_TOOLS, **options
        )
        details = r.usage.prompt_tokens_details if r.usage else None
        cached.append(details.cached_tokens or 0 if details else 0)
        messages.append(r.choices[0].message.model_dump(exclude_none=True))
        return r

    for task in tasks:
        _script(emulator, task)
        messages.append({"role": "user", "content": task.ask})
        r = send()
        for _ in task.tool_calls:
            for call in r.choices[0].message.tool_calls or []:
                name = call.function.name  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _output(name)})
            r = send()
    return cached


def responses_session(
    client: openai.OpenAI, emulator: Emulator, tasks: list[Task], **options: Any
) -> list[int]:
    """Cached input tokens of every request of one Responses session."""
    items: list[dict[str, Any]] = []
    cached: list[int] = []

    def send() -> Any:
        r = client.responses.create(
            model="gpt-5", instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS, **options
        )
        cached.append(r.usage.input_tokens_details.cached_tokens if r.usage else 0)
        items.extend(o.model_dump(exclude_none=True) for o in r.output)
        return r

    for task in tasks:
        _script(emulator, task)
        items.append({"role": "user", "content": task.ask})
        r = send()
        for _ in task.tool_calls:
            for o in r.output:
                if o.type == "function_call":
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": o.call_id,
                            "output": _output(o.name),
                        }
                    )
            r = send()
    return cached
