"""The MCP server in-process (the SDK's own client, a stand-in embedder): what each tool and
resource does to the served project's memory, and what it refuses."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ember.config import Settings, load_settings
from ember.embedder import EmbedderCache
from ember.embedder import factory as factory_module
from ember.errors import EmberError
from ember.memory.core import HierarchicalMemory
from ember.memory.mcp_cli import OnFirstUse
from ember.memory.mcp_memory import ProjectMemory, spend_summary
from ember.memory.mcp_server import build_server
from ember.memory.mcp_target import Served, served
from ember.memory.settings import MemorySettings
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.registry import Storage, storage_for
from tests.memory.conftest import HashEmbedder
from tests.memory.mcp_support import call, error

DB_FACT = "The API server uses PostgreSQL 16, configured in config/database.yml."
OTHER = "Release notes are written by the on-call engineer every Friday afternoon."


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(env={"EMBER_HOME": str(tmp_path / "home")})


@pytest.fixture
def target(settings: Settings, tmp_path: Path) -> Served:
    project = tmp_path / "api"
    project.mkdir()
    return served(settings, None, project)


@pytest.fixture
def parts(settings: Settings, target: Served) -> Iterator[tuple[ProjectMemory, Storage]]:
    storage = storage_for(settings)
    memory = ProjectMemory(settings, target, HashEmbedder(), storage)
    yield memory, storage
    memory.close()
    storage.close()


def inspect(target: Served) -> HierarchicalMemory:
    """The project's file as another process sees it (after the server closed it)."""
    return HierarchicalMemory(target.path, HashEmbedder())


async def test_save_search_update_list_forget(parts: tuple[ProjectMemory, Storage]) -> None:
    async with Client(build_server(parts[0])) as client:
        saved = await call(client, "memory_save", facts=[{"content": DB_FACT, "importance": 0.8}])
        [fact] = saved["saved"]
        assert fact == {"id": fact["id"], "content": DB_FACT} and saved["evidence"] is None
        again = await call(client, "memory_save", facts=[{"content": DB_FACT}])
        assert again["saved"] == [fact | {"already": True}]  # stored once
        found = await call(client, "memory_search", query="which database does the API use?")
        assert [h["id"] for h in found["hits"]] == [fact["id"]]
        assert set(found["hits"][0]) == {"id", "content", "score", "created_at", "metadata"}
        assert found["hits"][0]["metadata"]["source"] == "mcp"

        same_id = await call(client, "memory_update", id=fact["id"], importance=0.9)
        assert same_id["updated"]["id"] == fact["id"] and same_id["updated"]["importance"] == 0.9
        replaced = await call(
            client, "memory_update", id=fact["id"], content=DB_FACT + " Since v2."
        )
        new_id = replaced["now"]["id"]
        assert replaced["replaced"] == fact["id"] and new_id != fact["id"]
        assert replaced["now"]["importance"] == 0.9  # inherited

        listed = await call(client, "memory_list")
        assert [m["id"] for m in listed["memories"]] == [new_id] and listed["more"] is False
        old = await error(client, "memory_forget", id=fact["id"])
        assert f"was replaced by '{new_id}'" in old
        assert (await call(client, "memory_forget", id=new_id))["forgotten"] == [new_id]
        assert (await call(client, "memory_list"))["memories"] == []
        gone = await error(client, "memory_forget", id=new_id)
        assert "no memory with id" in gone and "memory_search or memory_list show the ids" in gone


async def test_search_keeps_the_injection_floor_and_explains_on_request(
    parts: tuple[ProjectMemory, Storage], settings: Settings
) -> None:
    async with Client(build_server(parts[0])) as client:
        await call(client, "memory_save", facts=[{"content": DB_FACT}, {"content": OTHER}])
        found = await call(
            client,
            "memory_search",
            query="which database does the API use?",
            top_k=10,
            explain=True,
        )
        assert [h["content"] for h in found["hits"]] == [DB_FACT]  # the other is under the floor
        floor = settings.section(MemorySettings).memory_min_score
        assert found["floor"] == pytest.approx(floor) and found["below_floor"] == 1
        explain = found["hits"][0]["explain"]
        assert explain["above_floor"] is True
        assert set(explain) == {
            "cosine",
            "keywords",
            "time",
            "short_turn",
            "reply_of",
            "floor",
            "above_floor",
        }
        plain = await call(client, "memory_search", query="which database does the API use?")
        assert "explain" not in plain["hits"][0] and "floor" not in plain


async def test_user_stated_evidence_only_when_the_client_says_so(
    parts: tuple[ProjectMemory, Storage], target: Served
) -> None:
    async with Client(build_server(parts[0])) as client:
        said = await call(client, "memory_save", facts=[{"content": DB_FACT}], user_stated=True)
        assert said["evidence"] == "user-stated"
        unsaid = await call(client, "memory_save", facts=[{"content": OTHER}])
        memory, storage = parts
        memory.close()
        storage.close()
        with inspect(target) as store:
            [stated] = store.evidence(said["saved"][0]["id"])
            assert stated.kind == "user-stated"
            assert stated.session_id == memory.session_id and stated.message_id is None
            assert store.evidence(unsaid["saved"][0]["id"]) == []


async def test_another_sessions_scratch_facts_are_out_of_reach(
    parts: tuple[ProjectMemory, Storage], target: Served
) -> None:
    """What a new session of the proxy would see: project-wide facts only."""
    with HierarchicalMemory(target.path, HashEmbedder()) as seeding:
        scratch = seeding.add(DB_FACT, session_id="proxy-session-1", importance=0.3)
    async with Client(build_server(parts[0])) as client:
        found = await call(client, "memory_search", query="which database does the API use?")
        assert found["hits"] == []
        assert (await call(client, "memory_list"))["memories"] == []
        assert "no memory with id" in await error(client, "memory_forget", id=scratch.id)


async def test_bad_input_is_a_tool_error_that_says_the_fix(
    parts: tuple[ProjectMemory, Storage],
) -> None:
    async with Client(build_server(parts[0])) as client:
        empty = await error(client, "memory_save", facts=[{"content": ""}])
        assert empty.startswith("memory_save: facts.0.content: is empty")
        high = await error(client, "memory_save", facts=[{"content": DB_FACT, "importance": 7}])
        assert "less than or equal to 1" in high and "from 0 (trivia) to 1" in high
        unknown = await error(client, "memory_update", id="nope", content="x")
        assert "no memory with id 'nope'" in unknown
        assert (await call(client, "memory_list"))["memories"] == []  # nothing half-written


async def test_an_unknown_tool_or_resource_is_a_protocol_error(
    parts: tuple[ProjectMemory, Storage],
) -> None:
    async with Client(build_server(parts[0])) as client:
        with pytest.raises(MCPError, match="unknown tool 'memory_delete'"):
            await client.call_tool("memory_delete", {"id": "x"})
        with pytest.raises(MCPError, match="unknown resource"):
            await client.read_resource("ember://nothing")


async def test_reading_a_project_without_data_creates_nothing(
    parts: tuple[ProjectMemory, Storage], target: Served
) -> None:
    async with Client(build_server(parts[0])) as client:
        assert (await call(client, "memory_search", query="anything"))["hits"] == []
        assert (await call(client, "memory_list"))["memories"] == []
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == ["ember://memories", "ember://spend"]
        for uri in ("ember://memories", "ember://spend"):
            await client.read_resource(uri)
        assert not target.path.parent.exists()


async def test_the_resources_hold_the_memories_and_the_spend(
    parts: tuple[ProjectMemory, Storage], target: Served
) -> None:
    async with Client(build_server(parts[0])) as client:
        await call(client, "memory_save", facts=[{"content": DB_FACT}])
        db = parts[1].database(target.path)
        for origin, cost in (("client", 0.5), ("client", 0.25), ("shadow", None)):
            row = ExchangeRecord(
                ts=1_790_000_000.0,
                session_id="s1",
                project=str(target.label),
                protocol="anthropic",
                model="claude-sonnet-4-5",
                status=200,
                outcome="ok",
                stream=False,
                usage=Usage(input_tokens=100, output_tokens=10, cache_read_tokens=1000),
                cost_usd=cost,
                price_snapshot="test",
                latency_ms=1.0,
                ttfb_ms=None,
                origin=origin,
            )
            db.write(row.insert)
        memories = json.loads((await client.read_resource("ember://memories")).contents[0].text)  # type: ignore[union-attr]
        assert [m["content"] for m in memories["memories"]] == [DB_FACT]
        assert memories["memories"][0]["scope"] == "user" and memories["more"] is False
        spend = json.loads((await client.read_resource("ember://spend")).contents[0].text)  # type: ignore[union-attr]
        assert (spend["requests"], spend["input_tokens"], spend["cache_read_tokens"]) == (
            3,
            300,
            3000,
        )
        assert spend["cost_usd"] is None and spend["unpriced_requests"] == 1  # one call unpriced
        [client_side, shadow] = spend["by_origin"]
        assert client_side["origin"] == "client" and client_side["cost_usd"] == pytest.approx(0.75)
        assert shadow["origin"] == "shadow" and shadow["cost_usd"] is None


def test_spend_of_no_calls_is_zero_and_priced() -> None:
    empty = spend_summary("p", [])
    assert empty["requests"] == 0 and empty["cost_usd"] == 0 and empty["by_origin"] == []


async def test_on_a_postgresql_store_the_tools_read_what_they_saved(
    tmp_path: Path, target: Served, pg_url: str
) -> None:
    """With ``store_url`` the project has no file: a search, the list and the spend resource
    read the project's schema (a check for the file said "no data yet" and found nothing),
    and nothing is created in the home."""
    settings = load_settings(env={"EMBER_HOME": str(tmp_path / "home"), "EMBER_STORE_URL": pg_url})
    storage = storage_for(settings)
    memory = ProjectMemory(settings, target, HashEmbedder(), storage)
    try:
        async with Client(build_server(memory)) as client:
            assert (await call(client, "memory_list"))["memories"] == []
            [fact] = (await call(client, "memory_save", facts=[{"content": DB_FACT}]))["saved"]
            found = await call(client, "memory_search", query="which database does the API use?")
            assert [h["id"] for h in found["hits"]] == [fact["id"]]
            assert [m["id"] for m in (await call(client, "memory_list"))["memories"]] == [
                fact["id"]
            ]
        row = ExchangeRecord(
            ts=1_790_000_000.0, session_id="s1", project=str(target.label),
            protocol="anthropic", model="claude-sonnet-4-5", status=200, outcome="ok",
            stream=False, usage=Usage(input_tokens=120, output_tokens=30), cost_usd=0.5,
            price_snapshot="test", latency_ms=1.0, ttfb_ms=None, origin="client",
        )  # fmt: skip
        storage.database(target.path).write(row.insert)
        assert (memory.spend()["requests"], memory.spend()["input_tokens"]) == (1, 120)
    finally:
        memory.close()
        storage.close()
    assert not target.path.exists() and not (tmp_path / "home" / "projects").exists()


def _counting_loads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], threading.Event]:
    """The process's model cache, swapped for one whose loads are counted (a stand-in
    embedder each time)."""
    loads: list[str] = []
    loaded = threading.Event()

    def load(backend: str, model: str, cache_dir: Path | None) -> HashEmbedder:
        loads.append(model)
        loaded.set()
        return HashEmbedder()

    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(load))  # type: ignore[arg-type]
    return loads, loaded


async def test_once_the_tools_are_listed_a_project_with_memories_has_its_model_loading(
    settings: Settings, target: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ember mcp`` imports no store at start (the client waits for the tools); once they
    are listed, the store is opened and the model loads in the background, so the first
    search does not pay for both."""
    with HierarchicalMemory(target.path, HashEmbedder()) as store:
        fact = store.add(DB_FACT, importance=0.8)
    loads, loaded = _counting_loads(monkeypatch)
    memory = OnFirstUse(settings, target)
    try:
        async with Client(build_server(memory, memory.warm)) as client:
            await client.list_tools()
            assert await anyio.to_thread.run_sync(loaded.wait, 30)  # before any call
            found = await call(client, "memory_search", query="which database does the API use")
        assert [h["id"] for h in found["hits"]] == [fact.id] and len(loads) == 1
    finally:
        memory.close()


async def test_a_project_without_memories_loads_no_model_and_creates_nothing(
    settings: Settings, target: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads, _ = _counting_loads(monkeypatch)
    memory = OnFirstUse(settings, target)
    try:
        async with Client(build_server(memory, memory.warm)) as client:
            await client.list_tools()
            assert (await call(client, "memory_search", query="deploys"))["hits"] == []
    finally:
        memory.close()
    assert loads == [] and not target.path.exists()


async def test_a_closed_server_opens_nothing_any_more(settings: Settings, target: Served) -> None:
    """A warm-up that outlives the server (the client left at once) must not reopen the
    store the server closed."""
    memory = OnFirstUse(settings, target)
    memory.close()
    with pytest.raises(EmberError, match="shutting down"):
        memory.memories()
