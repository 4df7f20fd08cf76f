"""The cross-session memory part of the demo.

Three short sessions against a fresh emulator, each through a real proxy:
1. project acme, ``EMBER_MEMORY_MODE=tool``: the user states a rule; the model saves it with
   ``memory_save``, which ember executes — the client only ever sees the model's text;
2. project acme, default ``auto_tail``: a new session's ask gets the rule injected after the
   client's own text block, framed READ-ONLY, with its ``[id]``;
3. another project: the same ask gets nothing (one database per project).
What is shown is read from the bytes the provider received.

The demo waits for the embedder before these sessions. The proxy does not (a request waits at
most ``memory_embedder_wait`` and goes on without memory), but a demo is not a request path: on
a busy machine the model took longer than that, session 2 printed "nothing was injected", and
the demo's output depended on the load of the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from rich.console import Console

from ember.compose import build_app
from ember.config import Settings, load_settings
from ember.embedder import EmbedderError, preload_from
from ember.server import BackgroundServer
from ember.testing import Emulator
from ember.testing.agent import ScriptedAgent, Task

RULE = "The login endpoint must answer 400, never 500, when the password is empty."
ACME = "/home/dev/acme-api"
BILLING = "/home/dev/billing"
SAVE: dict[str, Any] = {
    "facts": [
        {
            "content": RULE,
            "category": "convention",
            "importance": 0.9,
            "entities": ["login endpoint"],
        }
    ],
    "entities": [{"name": "login endpoint", "type": "endpoint"}],
}
#: How long the demo waits for the model: far past a load on a busy machine (~2-10 s), and past
#: the longest wait a request may be configured to take (``memory_embedder_wait`` <= 60 s).
EMBEDDER_WAIT = 300.0


@dataclass
class MemorySummary:
    saved_tool_calls_seen_by_client: int
    injected_block: str | None
    other_project_block: str | None
    embedder_error: str | None = None


def _session(proxy_url: str, emulator: Emulator, cwd: str, session: str, task: Task) -> int:
    """Run one ask; returns how many tool_use blocks the client saw."""
    with anthropic.Anthropic(
        base_url=proxy_url, api_key="demo-key-not-real", max_retries=0
    ) as client:
        agent = ScriptedAgent(client, emulator, cwd=cwd, session_id=session)
        agent.run([task])
    return sum(
        1
        for m in agent.history
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    )


def injected_block(emulator: Emulator) -> str | None:
    """The <ember-memory> block of the last request the provider received, if any."""
    ask = emulator.requests[-1].json()["messages"][-1]["content"]
    extra = [b["text"] for b in ask[1:] if b.get("text", "").startswith("<ember-memory>")]
    return extra[0] if extra else None


def wait_for_embedder(settings: Settings) -> str | None:
    """Block until the embedder is loaded; None then, else why it cannot be (no weights)."""
    try:
        preload_from(settings).get(timeout=EMBEDDER_WAIT)
    except EmbedderError as exc:
        return str(exc)
    return None


def run_memory_demo(home: Path, console: Console) -> MemorySummary:
    emulator = Emulator()
    with BackgroundServer(emulator) as upstream:
        urls: dict[str, Any] = {"anthropic_url": upstream.url, "openai_url": upstream.url + "/v1"}
        tool = load_settings(None, {}, home=home, memory_mode="tool", **urls)
        embedder_error = wait_for_embedder(tool)
        tool_app = build_app(tool)
        with BackgroundServer(tool_app) as proxy:
            seen = _session(
                proxy.url,
                emulator,
                ACME,
                "demo-memory-1",
                Task(
                    f"Remember for next time: {RULE}",
                    [],
                    "Saved; later sessions will know it.",
                    ember_tool_calls=[("memory_save", SAVE)],
                ),
            )
        auto = load_settings(None, {}, home=home, **urls)
        auto_app = build_app(auto)
        ask = Task(
            "Users see a 500 on login again. What do we know about it?",
            [],
            "The rule says empty passwords get a 400; the handler regressed.",
        )
        with BackgroundServer(auto_app) as proxy:
            _session(proxy.url, emulator, ACME, "demo-memory-2", ask)
            injected = injected_block(emulator)
            _session(proxy.url, emulator, BILLING, "demo-memory-3", ask)
            other = injected_block(emulator)
    summary = MemorySummary(seen, injected, other, embedder_error)
    _print(summary, console)
    return summary


def _print(s: MemorySummary, console: Console) -> None:
    console.print(
        "\n[bold]Cross-session memory[/] (what the provider received):\n"
        f"  session 1, {ACME}, EMBER_MEMORY_MODE=tool: the model called memory_save; ember ran "
        f"it, the client saw {s.saved_tool_calls_seen_by_client} tool calls\n"
        f"  session 2, {ACME}, auto_tail: the new ask carried, after the client's own text:"
    )
    if s.injected_block:
        console.print(s.injected_block, style="dim", markup=False, highlight=False)
    elif s.embedder_error is not None:
        console.print(
            f"  (nothing: the embedder is unavailable: {s.embedder_error})",
            markup=False,
            highlight=False,
        )
    else:
        console.print("  (nothing was injected)")
    console.print(
        f"  session 3, {BILLING}: "
        + (
            "nothing injected (another project, another database)"
            if s.other_project_block is None
            else "INJECTED — isolation failed"
        )
        + "\n"
    )
