"""Memory's metrics through the real proxy: what a scrape says each ask got is what the
provider received, and an ask turned away at capacity is visible there."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

from ember.memory.stage import MemoryStage
from ember.project import resolve_project
from ember.store.accounting import exchanges
from ember.testing import Reply
from ember.testing.agent import Task
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, FACTS, memory_blocks, memory_stage, run_agent, seed
from tests.memory.test_stage_e2e import sent as sent_bodies
from tests.metrics_support import scrape


def stage_of(stack: Stack) -> MemoryStage:
    [stage] = [s for s in stack.app.pipeline.stages if isinstance(s, MemoryStage)]
    return stage


def on_loop(stack: Stack, fn: Any) -> Any:
    """Run ``fn`` on the proxy's event loop (the gate is the loop's alone)."""
    assert stack.proxy.loop is not None

    async def call() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), stack.proxy.loop).result(5)


def test_injected_bytes_are_the_bytes_of_the_block_the_provider_received(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages=memory_stage)
    seed(stack.home, ACME, FACTS)
    run_agent(stack)  # one ask, two tool calls: three requests, the block replayed twice
    [block] = memory_blocks(sent_bodies(stack)[0]["messages"][0])
    m = scrape(stack.url)
    assert m.value("ember_memory_injections_total", result="injected") == 1
    assert m.value("ember_memory_injections_total") == 1  # the replays are not new asks
    assert m.value("ember_memory_injected_bytes_total") == len(block.encode()) > 0


def test_an_ask_turned_away_at_capacity_is_counted_and_gets_no_block(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages=memory_stage)
    seed(stack.home, ACME, FACTS)
    run_agent(stack)  # the embedder is loaded and the store known
    gate = stage_of(stack).gate
    slots = on_loop(stack, lambda: [gate.enter() for _ in range(gate.limit)])
    assert all(slots)  # every search slot taken, as by searches in flight
    try:
        m = scrape(stack.url)
        assert m.value("ember_memory_search_slots_busy") == gate.limit
        assert m.value("ember_memory_search_slots") == gate.limit
        task = Task("What does the login handler do with an empty password?", [], "A 400.")
        run_agent(stack, tasks=[task], session_id="0a1b2c3d-0000-4000-8000-000000000002")
    finally:
        on_loop(stack, lambda: [gate.leave() for _ in range(gate.limit)])
    assert memory_blocks(sent_bodies(stack)[-1]["messages"][0]) == []
    m = scrape(stack.url)
    assert m.value("ember_memory_injections_total", result="busy") == 1
    assert m.value("ember_memory_asks_turned_away_total", bound="slots") == 1
    assert m.value("ember_memory_asks_turned_away_total", bound="cpu_share") == 0
    assert m.value("ember_memory_search_slots_busy") == 0


def test_hidden_tool_rounds_are_counted_like_their_rows(make_stack: StackFactory) -> None:
    """Tool mode: ember runs the model's memory calls in rounds the client never sees; each
    round is a row of origin owned_tools, and a request of the same origin in the scrape —
    while the exchange's latency is observed once."""
    stack = make_stack(stages=memory_stage, memory_mode="tool")
    save = {"facts": [{"content": "Staging runs PostgreSQL 16.", "importance": 0.9}]}
    stack.emulator.script(Reply.tool_use("memory_save", save), Reply("Noted."))
    headers = {"x-ember-project-id": "acme", "x-ember-session-id": "s-1"}
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=headers
    ) as client:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            tools=[{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
            messages=[{"role": "user", "content": "Remember: staging runs PostgreSQL 16."}],
        )
    stack.settle()
    ref = resolve_project(headers)
    assert ref is not None
    rows = exchanges(ref.db_path(stack.home))
    by_origin: dict[tuple[str], float] = {}
    for r in rows:
        by_origin[(r["origin"],)] = by_origin.get((r["origin"],), 0) + 1
    assert by_origin == {("client",): 1, ("owned_tools",): 1}
    m = scrape(stack.url)
    assert m.by("ember_requests_total", "origin") == by_origin
    assert m.value("ember_request_latency_seconds_count") == 1
    for kind in ("input", "output"):
        assert m.value("ember_tokens_total", kind=kind, origin="owned_tools") == sum(
            r[f"{kind}_tokens"] for r in rows if r["origin"] == "owned_tools"
        )
