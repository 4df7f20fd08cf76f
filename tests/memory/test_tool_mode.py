"""Tool mode (``memory_mode = tool``) through the real proxy: the model's ``memory_search``
finds the project's memories whatever state the embedder is in."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.config import Settings
from ember.embedder import Embedder, EmbedderCache, EmbedderUnavailable, get_embedder
from ember.embedder import factory as factory_module
from ember.exchange import Stage
from ember.memory import HierarchicalMemory
from ember.memory.stage import MemoryStage
from ember.project import resolve_project
from ember.store.registry import Storage
from ember.testing import Reply
from tests.conftest import Stack, StackFactory

HEADERS = {"x-ember-project-id": "acme", "x-ember-session-id": "session-1"}
FACT = "The staging database is PostgreSQL 16 on db-staging."
NO_MATCH = "No remembered notes match."


def memory_stage(settings: Settings, storage: Storage) -> list[Stage]:
    return [MemoryStage(settings, storage)]


@pytest.fixture
def model() -> Embedder:
    """The real model (the process's), taken before a test swaps the proxy's loader."""
    return get_embedder()


def seed(home: Path, model: Embedder, fact: str = FACT) -> str:
    """One fact in project "acme", stored with its vector."""
    ref = resolve_project(HEADERS)
    assert ref is not None
    with HierarchicalMemory(ref.db_path(home), model) as mem:
        return mem.add(fact, importance=0.8).id


def searched(stack: Stack, query: str) -> str:
    """What ``memory_search`` answered the model when it searched for ``query``."""
    stack.emulator.script(Reply.tool_use("memory_search", {"query": query}), Reply("Done."))
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=HEADERS
    ) as client:
        reply = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            messages=[{"role": "user", "content": "Which database does staging use?"}],
        )
    assert [b.type for b in reply.content] == ["text"]  # the tool call stayed ember's
    result = stack.emulator.requests[-1].json()["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    return str(result["content"])


@pytest.fixture
def embedder_state(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, model: Embedder
) -> Iterator[str]:
    """The proxy's embedder: ``ready`` (the real model), ``loading`` (never done during the
    test) or ``failed`` (no weights)."""
    state = str(request.param)
    release = threading.Event()

    def load(*_: object) -> Embedder:
        if state == "loading":
            release.wait(30)
        raise EmbedderUnavailable("no weights here (the test says so)")

    if state != "ready":
        monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(load))
    yield state
    release.set()


@pytest.mark.parametrize("embedder_state", ["ready", "loading", "failed"], indirect=True)
def test_a_search_whose_words_match_finds_the_memory_in_every_embedder_state(
    make_stack: StackFactory, embedder_state: str, model: Embedder
) -> None:
    """The ask holds words the fact lacks ("which", "use"): searched by keywords alone, the
    fact must still be found by the words it shares."""
    stack = make_stack(stages=memory_stage, memory_mode="tool", memory_embedder_wait=0.2)
    fact_id = seed(stack.home, model)
    answer = searched(stack, "which database does staging use")
    assert f"[{fact_id}]" in answer and FACT in answer, answer


def test_keywords_alone_find_a_memory_holding_only_the_asks_common_words(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, model: Embedder
) -> None:
    """Both facts hold "staging"; only one holds "database". With no vector side, the other is
    still a keyword match and is listed (after the better one)."""
    stack = make_stack(stages=memory_stage, memory_mode="tool", memory_embedder_wait=0.2)
    db_id = seed(stack.home, model)
    server_id = seed(stack.home, model, "The staging server is in Frankfurt.")
    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(_fails))
    answer = searched(stack, "staging database")
    assert answer.index(f"[{db_id}]") < answer.index(f"[{server_id}]"), answer


def _fails(*_: object) -> Embedder:
    raise EmbedderUnavailable("no weights here (the test says so)")


def test_the_first_search_of_a_process_waits_for_a_loading_model_and_ranks_by_meaning(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, model: Embedder
) -> None:
    """The ask shares no word with the fact: only its meaning finds it. The model takes a
    moment to load (as on a fresh proxy); the first search waits for it, within the wait."""

    def slow(*_: Any) -> Embedder:
        time.sleep(0.5)
        return model

    stack = make_stack(stages=memory_stage, memory_mode="tool", memory_embedder_wait=10)
    fact_id = seed(stack.home, model)
    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(slow))
    answer = searched(stack, "which SQL engine runs pre-production")
    assert f"[{fact_id}]" in answer, answer


def test_without_a_model_an_ask_sharing_no_word_finds_nothing(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch, model: Embedder
) -> None:
    """The counterpart of the test above: what it finds, it finds by meaning."""
    stack = make_stack(stages=memory_stage, memory_mode="tool", memory_embedder_wait=0.2)
    seed(stack.home, model)
    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(_fails))
    assert searched(stack, "which SQL engine runs pre-production") == NO_MATCH
