"""The memory stage on its own: pure parts, and its rules with a fake store."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from ember.exchange import Exchange
from ember.memory.drafting import draft, new_id
from ember.memory.models import Memory, MemoryHit, NewMemory
from ember.memory.share import CpuShare
from ember.memory.stage import MemoryStage, ask_text, search_depth
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC
from ember.protocols.jsonedit import JsonDoc
from ember.store.registry import Storage


def test_the_query_leaves_out_client_context_blocks() -> None:
    text = (
        "<system-reminder>\nContents of CLAUDE.md: always use tabs ...\n</system-reminder>\n"
        "why does login return 500?"
    )
    assert ask_text(text) == "why does login return 500?"
    assert ask_text("<environment_context><cwd>/x</cwd></environment_context>") == ""


def test_gemini_clis_session_context_and_aiders_rules_are_not_the_ask() -> None:
    gemini = "<session_context>\n- **Workspace Directories:**\n  - /w\n</session_context>\nWhy?"
    assert ask_text(gemini) == "Why?"
    aider = "Where do we deploy?\n\n# *SEARCH/REPLACE block* Rules:\n\nEvery block must ..."
    assert ask_text(aider) == "Where do we deploy?"


def test_the_search_asks_one_spare_hit_per_injected_fact_within_three_times_the_items() -> None:
    assert search_depth(10, 0) == 10
    assert search_depth(10, 4) == 14
    assert search_depth(10, 500) == 30
    assert search_depth(0, 3) == 0


class _FakeStore:
    """Finds the same two facts for every ask."""

    def __init__(self, memories: list[Memory]) -> None:
        self.memories = memories
        self.embedder_ready = True
        self.deferred = False
        self.caught_up = 0

    def count(self) -> int:
        return len(self.memories)

    def is_empty(self) -> bool:
        return not self.memories

    def known_nonempty(self) -> bool:
        return False  # every ask asks ``is_empty``, as a store seen for the first time

    def catch_up(self) -> int:
        self.caught_up += 1
        self.deferred = False
        return 1

    def search(self, query: object, **kw: object) -> list[MemoryHit]:
        self.asked_top_k = kw.get("top_k")
        return [MemoryHit(m, 0.9, 0.9, None, 1.0) for m in self.memories]


class _FakeRouter:
    def __init__(self, store: _FakeStore, path: Path) -> None:
        self.store, self.path = store, path
        self.share = CpuShare(0.1)  # memory_cpu_share's default, without the idle reading

    def path_for(self, project: object) -> Path:
        return self.path

    def open_store(self, project: object) -> _FakeStore:
        return self.store

    def close(self) -> None:
        pass


def _ask(history: list[dict[str, object]], text: str) -> Exchange:

    history.append({"role": "user", "content": text})
    body = json.dumps({"model": "m", "max_tokens": 10, "messages": history}).encode()
    return Exchange(
        ANTHROPIC, "/v1/messages", "", {}, JsonDoc(body), "s1",
        ProjectRef("/p", "header:x-ember-cwd"),
    )  # fmt: skip


async def test_a_fact_already_injected_in_the_session_is_not_injected_again(
    tmp_path: Path,
) -> None:
    from ember.config import load_settings

    facts = [draft(NewMemory(t), new_id(), 1.0) for t in ("Builds use ninja", "CI is GitHub")]
    storage = Storage(tmp_path)
    router = _FakeRouter(_FakeStore(facts), tmp_path / "p" / "ember.db")
    stage = MemoryStage(load_settings(env={}), storage, router=router)  # type: ignore[arg-type]
    history: list[dict[str, object]] = []
    first = _ask(history, "how do we build?")
    await stage.on_request(first)
    assert all(f"[{m.id}]" in first.doc.to_bytes().decode() for m in facts)
    history.append({"role": "assistant", "content": "With ninja."})
    assert router.store.asked_top_k == 10  # a fresh ask: what `memory search --top-k 10` shows
    second = _ask(history, "and how do we build the docs?")
    await stage.on_request(second)
    assert router.store.asked_top_k == 12  # one spare hit per fact already injected
    sent = second.doc.to_bytes().decode()
    for m in facts:  # replayed once with the first ask, never added to the second
        assert sent.count(f"[{m.id}]") == 1
    storage.close()


async def test_facts_a_flood_left_without_vectors_get_them_after_the_next_ask(
    tmp_path: Path,
) -> None:
    """The ask is answered from what the store has (its words); the vectors follow on a
    worker thread, once, not in that ask's way."""
    from ember.config import load_settings

    facts = [draft(NewMemory("Builds use ninja"), new_id(), 1.0)]
    storage = Storage(tmp_path)
    router = _FakeRouter(_FakeStore(facts), tmp_path / "p" / "ember.db")
    router.store.deferred = True
    stage = MemoryStage(load_settings(env={}), storage, router=router)  # type: ignore[arg-type]
    history: list[dict[str, object]] = []
    first = _ask(history, "how do we build?")
    await stage.on_request(first)
    assert f"[{facts[0].id}]" in first.doc.to_bytes().decode()
    await asyncio.gather(*stage._catching_up)
    assert router.store.caught_up == 1 and not router.store.deferred
    history.append({"role": "assistant", "content": "With ninja."})
    await stage.on_request(_ask(history, "and the docs?"))
    assert router.store.caught_up == 1  # nothing left to catch up
    storage.close()


async def test_after_a_compaction_a_fact_whose_message_is_gone_may_be_injected_again(
    tmp_path: Path,
) -> None:
    """A compaction replaces the history with a summary: the message that carried a fact is
    gone, and a session that never gets it again would lose that memory for good."""
    from ember.config import load_settings

    facts = [draft(NewMemory("Builds use ninja"), new_id(), 1.0)]
    storage = Storage(tmp_path)
    router = _FakeRouter(_FakeStore(facts), tmp_path / "p" / "ember.db")
    stage = MemoryStage(load_settings(env={}), storage, router=router)  # type: ignore[arg-type]
    history: list[dict[str, object]] = []
    await stage.on_request(_ask(history, "how do we build?"))
    compacted: list[dict[str, object]] = [
        {"role": "user", "content": "Summary of the conversation so far: we discussed builds."},
        {"role": "assistant", "content": "Understood."},
    ]
    after = _ask(compacted, "and the docs build?")
    await stage.on_request(after)
    assert after.doc.to_bytes().decode().count(f"[{facts[0].id}]") == 1
    storage.close()


async def test_an_ask_that_finds_every_search_slot_busy_goes_on_and_is_counted(
    tmp_path: Path,
) -> None:
    """Memory gives way before forwarding does: no memories for this ask, a ledger row that
    says why, and ``ember stats`` counts it."""
    from ember.config import load_settings
    from ember.memory.ledger import ask_counts

    facts = [draft(NewMemory("Builds use ninja"), new_id(), 1.0)]
    storage = Storage(tmp_path)
    db = tmp_path / "p" / "ember.db"
    stage = MemoryStage(load_settings(env={}), storage, router=_FakeRouter(_FakeStore(facts), db))  # type: ignore[arg-type]
    while stage.gate.enter():  # other agents' asks hold every slot
        pass
    busy = _ask([], "how do we build?")
    await stage.on_request(busy)
    assert "ninja" not in busy.doc.to_bytes().decode()
    stage.gate.leave()
    served = _ask([], "how do we build the docs?")
    served.session_id = "s2"
    await stage.on_request(served)
    assert "ninja" in served.doc.to_bytes().decode()
    assert storage.database(db).flush(10)
    counts = storage.database(db).read(ask_counts)
    assert (counts.asks, counts.with_memories, counts.busy) == (2, 1, 1)
    assert "1 went on without them" in counts.sentence()
    storage.close()


async def test_an_ask_whose_search_hangs_goes_on_within_the_wait_and_is_counted(
    tmp_path: Path,
) -> None:
    """A store that stops answering (a hung PostgreSQL never closes the connection) holds
    no request: past ``memory_search_wait`` the ask goes on without memories, the ledger
    says it went without, and the slot is given back when the search ends after all."""
    from ember.config import load_settings

    facts = [draft(NewMemory("Builds use ninja"), new_id(), 1.0)]
    release = threading.Event()

    class _Hung(_FakeStore):
        def search(self, query: object, **kw: object) -> list[MemoryHit]:
            release.wait(30)
            return super().search(query, **kw)

    storage = Storage(tmp_path)
    router = _FakeRouter(_Hung(facts), tmp_path / "p" / "ember.db")
    settings = load_settings(env={"EMBER_MEMORY_SEARCH_WAIT": "0.2"})
    stage = MemoryStage(settings, storage, router=router)  # type: ignore[arg-type]
    ask = _ask([], "how do we build?")
    started = time.monotonic()
    await stage.on_request(ask)
    assert time.monotonic() - started < 5
    assert "ninja" not in ask.doc.to_bytes().decode()
    assert stage.gate.turned_away_by["search_wait"] == 1 and stage.gate.busy == 1
    release.set()
    for _ in range(200):
        if stage.gate.busy == 0:
            break
        await asyncio.sleep(0.01)
    assert stage.gate.busy == 0  # the search ended: its slot is free again
    storage.close()
