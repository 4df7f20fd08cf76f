"""Cross-session memory through the real proxy, the official SDK and the emulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from ember.config import Settings
from ember.embedder import get_embedder
from ember.exchange import Stage
from ember.memory import HierarchicalMemory, MemoryFilter
from ember.memory.stage import MemoryStage
from ember.memory.tools import MEMORY_TOOL_SPECS
from ember.project import resolve_project
from ember.store.registry import Storage
from ember.testing import Reply
from ember.testing.agent import ScriptedAgent, Task, TurnUsage, demo_tasks, session_tasks
from tests.conftest import Stack, StackFactory

ACME = "/home/dev/acme-api"
FACTS = [
    "The login handler in src/auth/login.py must reject an empty password with a 400.",
    "Tests for the auth package run with pytest tests/test_login.py -q.",
    "The team prefers small commits with a regression test for every bug fix.",
]


def memory_stage(settings: Settings, storage: Storage) -> list[Stage]:
    return [MemoryStage(settings, storage)]


def seed(home: Path, cwd: str, facts: list[str], importance: float = 0.8) -> list[str]:
    ref = resolve_project({}, None, f"Working directory: {cwd}")
    assert ref is not None
    with HierarchicalMemory(ref.db_path(home), get_embedder()) as mem:
        return [mem.add(f, importance=importance).id for f in facts]


def run_agent(
    stack: Stack, cwd: str = ACME, tasks: list[Task] | None = None, **options: Any
) -> list[TurnUsage]:
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
        agent = ScriptedAgent(client, stack.emulator, cwd=cwd, **options)
        turns = agent.run(tasks if tasks is not None else demo_tasks()[:1])
    stack.settle()
    return turns


def sent(stack: Stack) -> list[dict[str, Any]]:
    return [r.json() for r in stack.emulator.requests if r.path == "/v1/messages"]


def memory_blocks(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    return [
        b["text"]
        for b in content
        if isinstance(b, dict)
        and b.get("type") == "text"
        and b["text"].startswith("<ember-memory>")
    ]


def test_a_new_ask_gets_memories_after_the_clients_block_and_keeps_them_every_turn(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages=memory_stage)
    ids = seed(stack.home, ACME, FACTS)
    run_agent(stack)  # one ask, two tool calls: three requests
    first, *later = sent(stack)
    ask = first["messages"][0]["content"]
    assert ask[0]["cache_control"] == {"type": "ephemeral"}  # the client's block, untouched
    [block] = memory_blocks(first["messages"][0])
    assert ask[1] == {"type": "text", "text": block}
    assert "READ-ONLY" in block and f"[{ids[0]}]" in block and "empty password" in block
    raw = [r.body for r in stack.emulator.requests]
    needle = json.dumps(block, ensure_ascii=False).encode()
    for request, body in zip(later, raw[1:], strict=True):
        # Replayed in history: the same bytes at the same place, every turn.
        assert memory_blocks(request["messages"][0]) == [block]
        assert needle in body
    assert all(memory_blocks(m) == [] for r in later for m in r["messages"][1:])


def test_memory_never_crosses_projects(make_stack: StackFactory) -> None:
    stack = make_stack(stages=memory_stage)
    seed(stack.home, ACME, FACTS)
    run_agent(stack, cwd="/home/dev/other/acme-api")  # same basename, another project
    assert not any(memory_blocks(m) for r in sent(stack) for m in r["messages"])


def test_a_session_id_two_projects_share_never_carries_memories_across(
    make_stack: StackFactory,
) -> None:
    """A harness that sends one fixed session id (``x-ember-session-id``, a reused
    ``prompt_cache_key``) from two projects: the second project's requests name their own
    working directory, so they get its memories (none here), never the first's."""
    stack = make_stack(stages=memory_stage)
    seed(stack.home, ACME, FACTS)
    run_agent(stack)  # the scripted agent's fixed session id, bound to acme-api
    before = len(sent(stack))
    assert any(memory_blocks(m) for r in sent(stack) for m in r["messages"])
    run_agent(stack, cwd="/home/dev/shop")  # the same session id, another project
    later = sent(stack)[before:]
    assert later and not any(memory_blocks(m) for r in later for m in r["messages"])


def test_unresolved_project_gets_nothing_and_nothing_is_written(make_stack: StackFactory) -> None:
    stack = make_stack(stages=memory_stage)
    r = httpx2.post(
        stack.url + "/v1/messages",
        json={
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "what is the login rule?"}],
        },
    )
    assert r.status_code == 200
    stack.settle()
    assert stack.emulator.last_request.json()["messages"][0]["content"] == "what is the login rule?"
    assert not (stack.home / "projects").exists()


def test_a_restarted_proxy_replays_the_same_block(make_stack: StackFactory) -> None:
    first = make_stack(stages=memory_stage)
    seed(first.home, ACME, FACTS)
    with anthropic.Anthropic(base_url=first.url, api_key="k", max_retries=0) as client:
        agent = ScriptedAgent(client, first.emulator, cwd=ACME)
        agent.run(demo_tasks()[:1])
    first.settle()
    [block] = memory_blocks(sent(first)[0]["messages"][0])
    second = make_stack(stages=memory_stage, upstream=first.upstream_url, emulator=first.emulator)
    with anthropic.Anthropic(base_url=second.url, api_key="k", max_retries=0) as client:
        agent.client = client
        agent.run([Task("And the signup endpoint?", [], "Same fix applies.")])
    after = sent(second)[-1]
    assert memory_blocks(after["messages"][0]) == [block]


def test_thirty_turn_session_keeps_99_percent_of_cache_reads(make_stack: StackFactory) -> None:
    facts = [
        f"Module {i} reads its limits from config/module_{i}.toml, never from constants."
        for i in range(8)
    ]
    off_stack = make_stack()
    off = run_agent(off_stack, tasks=session_tasks(30))
    on_stack = make_stack(stages=memory_stage)
    seed(on_stack.home, ACME, facts)
    on = run_agent(on_stack, tasks=session_tasks(30))
    injected = [m for r in sent(on_stack) for m in r["messages"] if memory_blocks(m)]
    assert injected, "memory was really injected"
    read_off = sum(t.cache_read_tokens for t in off)
    read_on = sum(t.cache_read_tokens for t in on)
    assert len(on) == len(off) == 30
    assert read_on >= 0.99 * read_off, (read_on, read_off)


def test_tool_mode_saves_and_finds_memories_the_client_never_sees(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages=memory_stage, memory_mode="tool")
    save = {
        "facts": [
            {
                "content": "The staging database is PostgreSQL 16 on db-staging.",
                "importance": 0.9,
                "entities": ["staging database"],
            }
        ],
        "entities": [{"name": "staging database", "type": "service"}],
    }
    stack.emulator.script(Reply.tool_use("memory_save", save), Reply("Noted for later."))
    headers = {"x-ember-project-id": "acme", "x-ember-session-id": "session-1"}
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "Remember: staging runs PostgreSQL 16."}],
    }
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=headers
    ) as client:
        reply = client.messages.create(**body)
        assert [b.type for b in reply.content] == ["text"]
        offered = [t["name"] for t in stack.emulator.requests[0].json()["tools"]]
        assert offered == ["Bash", *(s.name for s in MEMORY_TOOL_SPECS)]

        stack.emulator.script(
            Reply.tool_use("memory_search", {"query": "staging database"}),
            Reply("Staging runs PostgreSQL 16."),
        )
        body["messages"] = [{"role": "user", "content": "Which database does staging use?"}]
        reply = client.messages.create(**body, extra_headers={"x-ember-session-id": "session-2"})
    assert reply.content[0].text == "Staging runs PostgreSQL 16."  # type: ignore[union-attr]
    result = stack.emulator.requests[-1].json()["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "PostgreSQL 16" in result["content"]
    stack.settle()
    ref = resolve_project({"x-ember-project-id": "acme"})
    assert ref is not None
    with HierarchicalMemory(ref.db_path(stack.home), get_embedder()) as mem:
        other = mem.list(memory_filter=MemoryFilter(session_id="session-3"))
    # Important enough to bubble: a project-wide copy that later sessions see.
    assert [m.content for m in other] == ["The staging database is PostgreSQL 16 on db-staging."]


@pytest.mark.parametrize("mode", ["off"])
def test_memory_off_changes_nothing(make_stack: StackFactory, mode: str) -> None:
    stack = make_stack(stages=memory_stage, memory_mode=mode)
    seed(stack.home, ACME, FACTS)
    run_agent(stack)
    assert not any(memory_blocks(m) for r in sent(stack) for m in r["messages"])
