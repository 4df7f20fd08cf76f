"""The library's API on its own: bad arguments say what is wrong, threads are apart, and the
batch is read from the resident tool's calls only (no provider is called here)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ember.compose import shadow_library
from ember.config import load_settings
from ember.protocols.base import AssembledMessage, Block
from ember.shadow.library import LibraryError, ShadowLibrary, database_path
from ember.shadow.propose import MEMORY_PROPOSE
from ember.shadow.question import answer_batch
from tests.shadow.test_e2e import rows

CWD = "/home/dev/api-project"


@pytest.fixture
async def library(tmp_path: Path) -> AsyncIterator[ShadowLibrary]:
    settings = load_settings(env={}, home=tmp_path, shadow="primary")
    async with shadow_library(settings) as lib:
        yield lib


def request(*texts: str) -> bytes:
    messages: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return json.dumps(
        {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": messages}
    ).encode()


def answer(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


async def test_bad_arguments_say_what_is_wrong(library: ShadowLibrary) -> None:
    with pytest.raises(LibraryError, match="unknown wire format 'gemini'"):
        await library.note("s", project=CWD, protocol="gemini", request=b"{}", answer=None)
    with pytest.raises(LibraryError, match="request is not the JSON body that was sent"):
        await library.note("s", project=CWD, protocol="anthropic", request=b"{", answer=None)
    with pytest.raises(LibraryError, match="session_id is empty"):
        library.user_message("")
    off = load_settings(env={}, home=library.settings.home, shadow="off")
    with pytest.raises(LibraryError, match="EMBER_SHADOW=off"):
        ShadowLibrary(off, library.upstream)


async def test_each_thread_is_a_shadow_of_its_own(library: ShadowLibrary) -> None:
    """A sub-agent's messages never land in the main thread's lineage (evidence must come
    from the thread that proposes), and the framework's calls are the session's spend."""
    main = await library.note(
        "s1",
        project=CWD,
        protocol="anthropic",
        request=request("hello"),
        answer=answer("hi there"),
    )
    sub = await library.note(
        "s1",
        project=CWD,
        protocol="anthropic",
        request=request("explore the repo"),
        answer=answer("it has two packages"),
        thread="explore",
    )
    assert (main.key, sub.key) == ("s1", "s1/explore")
    assert main.turn_ended and sub.turn_ended
    await library.close()
    db = database_path(library.settings, CWD)
    by_session = rows(
        db, "SELECT session_id, content FROM transcript_messages ORDER BY session_id, position"
    )
    assert by_session == [
        ("s1", "hello"),
        ("s1", "hi there"),
        ("s1/explore", "explore the repo"),
        ("s1/explore", "it has two packages"),
    ]
    assert rows(db, "SELECT session_id, origin FROM exchanges ORDER BY session_id") == [
        ("s1", "client"),
        ("s1/explore", "client"),
    ]


async def test_run_now_without_anything_noted_runs_nothing(library: ShadowLibrary) -> None:
    assert await library.run_now("never-seen") is None


def call(name: str, facts: list[Any], call_id: str) -> Block:
    return Block("tool_use", id=call_id, name=name, input={"facts": facts})


def test_the_batch_is_read_from_the_resident_tool_calls_only() -> None:
    fact = {"content": "a", "evidence": [{"kind": "user-stated", "messageId": "m1"}]}
    other = {"content": "b", "evidence": [{"kind": "user-stated", "messageId": "m2"}]}
    message = AssembledMessage(
        "anthropic",
        blocks=[
            call(MEMORY_PROPOSE, [fact], "c1"),
            call("Bash", [other], "c2"),  # a shadow turn runs no other tool: not read
            Block("tool_use", id="c3", name=MEMORY_PROPOSE, input='{"facts": []}'),
        ],
        complete=True,
    )
    assert answer_batch(message, MEMORY_PROPOSE) == {"facts": [fact]}
    fenced = AssembledMessage("anthropic", blocks=[Block("text", '```json\n{"facts": []}\n```')])
    assert answer_batch(fenced, MEMORY_PROPOSE) == {"facts": []}  # no call: the text is read
    broken = AssembledMessage("anthropic", blocks=[call(MEMORY_PROPOSE, [], "c1")])
    broken.blocks[0].input = {"fact": []}
    with pytest.raises(ValueError, match=r'memory_propose call\'s input is not \{"facts"'):
        answer_batch(broken, MEMORY_PROPOSE)
