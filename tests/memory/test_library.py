"""Memory in library mode (``ember.memory.library``): a framework that calls the model itself
gets the project's memories in its requests as the proxy's clients do.

The framework below is the official ``anthropic`` SDK's async client talking straight to the
emulator on loopback (no proxy), with a loop like an agent's: each ask, the model's tool calls
and their results, the history kept *without* ember's blocks and ``cache_control`` on the
latest block only (Claude Code's moving breakpoint). Before each call the framework hands its
request to ``MemoryInjector.inject`` and sends what comes back.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.config import Settings, load_settings
from ember.embedder import get_embedder
from ember.framework import LibraryError
from ember.memory import HierarchicalMemory
from ember.memory.library import MemoryInjector
from ember.project import resolve_project
from ember.protocols import ADAPTERS
from ember.server import BackgroundServer
from ember.testing import Emulator, Reply
from ember.testing.agent import TOOLS, Task, session_tasks, system_prompt

ACME = "/home/dev/acme-api"
SESSION = "framework-session-1"
FACTS = [
    f"Module {i} reads its limits from config/module_{i}.toml, never from constants."
    for i in range(40)
]


@pytest.fixture
def emulator() -> Iterator[tuple[Emulator, str]]:
    emu = Emulator()
    with BackgroundServer(emu) as server:
        yield emu, server.url


def settings(home: Path, **more: Any) -> Settings:
    return load_settings(env={"EMBER_HOME": str(home)}, shadow="off", **more)


def seed(home: Path, facts: list[str]) -> list[str]:
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    with HierarchicalMemory(ref.db_path(home), get_embedder()) as mem:
        return [mem.add(f, importance=0.8).id for f in facts]


def tool_output(name: str, args: dict[str, Any]) -> str:
    if name == "Read":
        return "\n".join(f"{i:4} | line {i} of {args.get('path')}" for i in range(1, 40))
    return f"$ {args.get('command')}\ncollected 42 items\n{'.' * 42}\n42 passed"


def with_breakpoint(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with ``cache_control`` on the last block of the last message only."""
    out = [dict(m) for m in history]
    blocks = [dict(b) for b in out[-1]["content"]]
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    out[-1] = {**out[-1], "content": blocks}
    return out


async def framework(
    url: str, emu: Emulator, tasks: list[Task], memory: MemoryInjector | None
) -> list[tuple[int, int]]:
    """Run ``tasks`` as an agent framework does; (prompt tokens read from the cache, all the
    prompt's tokens) of each call."""
    history: list[dict[str, Any]] = []
    reads: list[tuple[int, int]] = []
    async with anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0) as client:
        for task in tasks:
            calls = [Reply(f"Let me use {n}.", [(n, a)]) for n, a in task.tool_calls]
            emu.script(*calls, Reply(task.answer))
            history.append({"role": "user", "content": [{"type": "text", "text": task.ask}]})
            while True:
                request: dict[str, Any] = {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 4096,
                    "system": system_prompt(ACME),
                    "tools": TOOLS,
                    "messages": with_breakpoint(history),
                }
                if memory is not None:
                    request = await memory.inject(
                        SESSION, project=ACME, protocol="anthropic", request=request
                    )
                msg = await client.messages.create(**request)
                u = msg.usage
                read = u.cache_read_input_tokens or 0
                reads.append((read, read + (u.cache_creation_input_tokens or 0) + u.input_tokens))
                answer = [b.model_dump(exclude_none=True) for b in msg.content]
                history.append({"role": "assistant", "content": answer})
                uses = [b for b in msg.content if b.type == "tool_use"]
                if not uses:
                    break
                history.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": tool_output(
                        b.name, b.input)} for b in uses  # type: ignore[arg-type]
                ]})  # fmt: skip
    return reads


def blocks_of(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    return [
        b["text"]
        for b in content if isinstance(content, list)
        if b.get("type") == "text" and b["text"].startswith("<ember-memory>")
    ]  # fmt: skip


def test_a_framework_loop_gets_memories_replayed_byte_for_byte_and_keeps_its_cache_reads(
    tmp_path: Path, emulator: tuple[Emulator, str]
) -> None:
    emu, url = emulator
    tasks = session_tasks(20)
    off = asyncio.run(framework(url, emu, tasks, None))
    plain = len(emu.requests)

    home = tmp_path / "home"
    seed(home, FACTS)

    async def with_memory() -> list[int]:
        async with MemoryInjector(settings(home)) as memory:
            return await framework(url, emu, tasks, memory)

    on = asyncio.run(with_memory())
    raw = [r.body for r in emu.requests[plain:]]
    sent = [json.loads(b) for b in raw]
    injected = [
        (i, k, block)
        for i, r in enumerate(sent)
        for k, m in enumerate(r["messages"])
        for block in blocks_of(m)
    ]
    first = {(k, block): i for i, k, block in reversed(injected)}  # where each block appeared
    assert len(first) >= 2, "several asks got memories"
    assert all("READ-ONLY" in block for _, block in first)
    for (k, block), i in first.items():
        # The ask's own blocks come first, untouched; the block after them.
        assert sent[i]["messages"][k]["content"][-1] == {"type": "text", "text": block}
        needle = json.dumps(block, ensure_ascii=False).encode()
        for later in range(i + 1, len(sent)):
            # Every later request carries it again, at the same message, as the same bytes.
            assert blocks_of(sent[later]["messages"][k]) == [block]
            assert needle in raw[later]
    # Each request's history is the previous request, as sent (the latest message's
    # breakpoint moved on): the provider's cached prefix never changes.
    for before, after in itertools.pairwise(sent):
        n = len(before["messages"]) - 1
        assert after["messages"][:n] == before["messages"][:n]
    assert len(on) == len(off) == 20
    # The share of the prompt read from the cache, without and with memories: kept.
    share_off, share_on = (sum(r for r, _ in x) / sum(t for _, t in x) for x in (off, on))
    assert share_on >= 0.99 * share_off, (share_on, share_off)


def test_a_restarted_framework_replays_the_same_block(
    tmp_path: Path, emulator: tuple[Emulator, str]
) -> None:
    """The ledger is the project's: a new injector (a restarted framework) on the same home
    puts the session's earlier block back, and retrieves nothing again for it."""
    emu, url = emulator
    home = tmp_path / "home"
    seed(home, FACTS)
    tasks = session_tasks(6)

    async def run(part: list[Task]) -> None:
        async with MemoryInjector(settings(home)) as memory:
            await framework(url, emu, part, memory)

    asyncio.run(run(tasks[:1]))
    [block] = blocks_of(emu.requests[0].json()["messages"][0])

    async def resumed() -> dict[str, Any]:
        history = [
            {"role": "user", "content": [{"type": "text", "text": tasks[0].ask}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks. Anything else?"}]},
        ]
        async with MemoryInjector(settings(home)) as memory:
            return await memory.inject(
                SESSION, project=ACME, protocol="anthropic", request={"messages": history}
            )

    again = asyncio.run(resumed())
    assert blocks_of(again["messages"][0]) == [block]


ASKS: dict[str, tuple[str, bytes]] = {
    "anthropic": (
        "/v1/messages",
        b'{"model":"m","max_tokens":64,"messages":[{"role":"user",'
        b'"content":"Where does module 3 read its limits from?"}]}',
    ),
    "openai_chat": (
        "/v1/chat/completions",
        b'{"model":"m","messages":[{"role":"system","content":"Be brief."},'
        b'{"role":"user","content":"Where does module 3 read its limits from?"}]}',
    ),
    "openai_responses": (
        "/v1/responses",
        b'{"model":"m","input":[{"role":"user","content":[{"type":"input_text",'
        b'"text":"Where does module 3 read its limits from?"}]}]}',
    ),
}


@pytest.mark.parametrize("protocol", sorted(ASKS))
def test_every_wire_format_gets_the_block_after_the_ask_and_keeps_every_other_byte(
    tmp_path: Path, protocol: str
) -> None:
    home = tmp_path / "home"
    seed(home, FACTS)
    path, body = ASKS[protocol]
    adapter = ADAPTERS[path]

    async def run() -> tuple[bytes, bytes]:
        async with MemoryInjector(settings(home)) as memory:
            sent = await memory.inject(SESSION, project=ACME, protocol=protocol, request=body)
            replay = await memory.inject(SESSION, project=ACME, protocol=protocol, request=body)
            return sent, replay

    sent, replay = asyncio.run(run())
    assert replay == sent  # a retry of the ask: the same bytes, nothing retrieved again
    value = json.loads(sent)
    ask = adapter.latest_user_index(value)
    assert ask is not None
    assert "config/module_3.toml" in adapter.user_text(value, ask)
    # Only the ask changed: the client's text is still its first part.
    before = json.loads(body)
    assert adapter.user_text(before, ask) in adapter.user_text(value, ask)
    assert sent.startswith(body[: body.rindex(b'{"role":"user"')])  # every earlier byte


def test_arguments_it_cannot_use_are_refused_saying_what_to_pass(tmp_path: Path) -> None:
    home = tmp_path / "home"

    async def call(**kw: Any) -> Any:
        async with MemoryInjector(settings(home)) as memory:
            args: dict[str, Any] = {
                "project": ACME,
                "protocol": "anthropic",
                "request": {"messages": []},
            }
            return await memory.inject(SESSION, **{**args, **kw})

    with pytest.raises(LibraryError, match="unknown wire format 'gemini'"):
        asyncio.run(call(protocol="gemini"))
    with pytest.raises(LibraryError, match="request is not the JSON body"):
        asyncio.run(call(request=b"not json"))
    with pytest.raises(LibraryError, match="model_dump"):
        asyncio.run(call(request={"messages": [object()]}))
    with pytest.raises(LibraryError, match="memory_mode is tool"):
        MemoryInjector(settings(home, memory_mode="tool"))


def test_with_memory_off_the_request_goes_as_it_was(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, FACTS)
    _, body = ASKS["anthropic"]

    async def run() -> bytes:
        async with MemoryInjector(settings(home, memory_mode="off")) as memory:
            return await memory.inject(SESSION, project=ACME, protocol="anthropic", request=body)

    assert asyncio.run(run()) == body
