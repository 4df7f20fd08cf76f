"""Library mode end to end: a framework that calls the model itself, with the official SDKs,
against the emulator — no proxy anywhere.

The framework notes each call; a fact the user states is extracted on the hot path (the
noted request replayed byte for byte, read from the provider's cache), proposed through the
resident memory_propose tool, checked and promoted as in proxy mode. A memory_propose call in
an ordinary turn is refused by the policy helper; a user message aborts a running shadow call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from ember.compose import shadow_library
from ember.config import load_settings
from ember.embedder import get_embedder
from ember.protocols.jsonedit import locate
from ember.server import BackgroundServer
from ember.shadow.library import ShadowLibrary, database_path
from ember.shadow.propose import MEMORY_PROPOSE, OUTSIDE_SHADOW
from ember.testing import Emulator
from ember.testing.replies import Reply
from ember.testing.shadow import shadow_replies
from tests.metrics_support import parse
from tests.shadow.library_support import CWD, KEY, Framework, agent_tools
from tests.shadow.test_e2e import rows

FACT = "Remember: releases deploy to eu-west-1 through the deploy workflow on tags."
INTRO = "Let me walk you through this repository before we start. " * 160
MODELS = {"anthropic": "claude-sonnet-4-5", "openai_chat": "gpt-5", "openai_responses": "gpt-5"}
CONVERSATION = {"anthropic": "messages", "openai_chat": "messages", "openai_responses": "input"}


@pytest.fixture
def emulator() -> Iterator[tuple[Emulator, str]]:
    emu = Emulator()
    emu.reply_fn = shadow_replies()
    with BackgroundServer(emu) as server:
        yield emu, server.url


@pytest.fixture
async def library(emulator: tuple[Emulator, str], tmp_path: Path) -> AsyncIterator[ShadowLibrary]:
    get_embedder()  # loaded once: promotion must not wait for the model
    _, url = emulator
    settings = load_settings(
        env={},
        home=tmp_path,
        anthropic_url=url,
        openai_url=url + "/v1",
        shadow="primary",
        shadow_max_share=1.0,  # two-turn sessions: a shadow run costs about one turn
        shadow_idle_seconds=0.3,  # a turn's end is read once the session is quiet this long
    )
    async with shadow_library(settings) as lib:
        yield lib


async def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting")


def shadow_requests(emu: Emulator) -> list[bytes]:
    return [r.body for r in emu.requests if b"[ember shadow turn]" in r.body]


def assert_replayed_byte_for_byte(recorded: bytes, shadow: bytes, key: str) -> None:
    """Everything before the end of the recorded conversation, and everything after it, is
    the noted request's own bytes: the shadow turn only inserts its messages there."""
    text = recorded.decode()
    end = locate(text, [key])[1] - 1  # the conversation array's closing bracket
    head, tail = text[:end].encode(), text[end:].encode()
    assert shadow.startswith(head) and shadow.endswith(tail)
    assert len(shadow) > len(recorded)
    before, after = json.loads(recorded), json.loads(shadow)
    assert after[key][: len(before[key])] == before[key]


@pytest.mark.parametrize("protocol", sorted(MODELS))
async def test_a_framework_gets_a_stated_fact_extracted_hot_and_promoted(
    protocol: str, emulator: tuple[Emulator, str], library: ShadowLibrary
) -> None:
    emu, url = emulator
    session = f"lib-{protocol}"
    app = Framework(protocol, url, library, session, MODELS[protocol])
    await app.user(INTRO)
    noted_turns = len(app.sent)
    await app.user(FACT)
    assert len(app.sent) == noted_turns + 1
    prefix = library.core.runner.prefixes.get(session)
    assert prefix is not None and prefix.sent == app.sent[-1]  # the bytes sent, kept as sent
    record = await library.run_now(session)
    assert record is not None and record.status == "completed"
    db = database_path(library.settings, CWD)
    [(path, cache_read, fresh, cache_write, status)] = rows(
        db,
        "SELECT path, cache_read_tokens, input_tokens, cache_write_tokens, status "
        "FROM shadow_memory_runs",
    )
    assert (path, status) == ("hot", "completed")
    share = cache_read / (cache_read + fresh + cache_write)
    assert share > 0.85, f"cache-read share {share:.2f}"
    # The hot turn is the noted request, byte for byte, plus the shadow's own messages; the
    # tools are the framework's (memory_propose included), untouched; the credentials too.
    [shadow] = shadow_requests(emu)
    assert_replayed_byte_for_byte(app.sent[-1], shadow, CONVERSATION[protocol])
    assert json.loads(shadow)["tools"] == agent_tools(protocol)
    assert f"call no tool but {MEMORY_PROPOSE}".encode() in shadow
    [call] = [r for r in emu.requests if r.body == shadow]
    assert call.api_key == KEY
    # The proposal came through the tool call, was validated and became a memory.
    await wait_for(
        lambda: rows(db, "SELECT memory_id FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")
    )
    [(content, error, evidence)] = rows(
        db, "SELECT content, validation_error, evidence FROM shadow_fact_proposals"
    )
    assert "eu-west-1" in content and error is None
    [item] = json.loads(evidence)
    [(kind,)] = rows(db, f"SELECT kind FROM transcript_messages WHERE id='{item['messageId']}'")
    assert item["kind"] == "user-stated" and kind == "user"
    # The framework's own calls are the session's spend; the shadow's are apart.
    origins = dict(rows(db, "SELECT origin, COUNT(*) FROM exchanges GROUP BY origin"))
    assert origins == {"client": len(app.sent), "shadow": 1}


async def test_a_framework_can_serve_the_libraries_own_metrics(
    emulator: tuple[Emulator, str], library: ShadowLibrary
) -> None:
    """No proxy, so no ``/metrics``: the library counts in a registry of its own, which the
    framework serves with prometheus_client; it holds what the tables hold."""
    _, url = emulator
    app = Framework("anthropic", url, library, "lib-metrics", MODELS["anthropic"])
    await app.user(INTRO)
    await app.user(FACT)
    record = await library.run_now("lib-metrics")
    assert record is not None and record.status == "completed"
    m = parse(generate_latest(library.metrics).decode())
    db = database_path(library.settings, CWD)
    table = dict(
        rows(
            db,
            "SELECT status || '/' || path, COUNT(*) FROM shadow_memory_runs GROUP BY status, path",
        )
    )
    assert table == {"completed/hot": 1}
    assert m.by("ember_shadow_runs_total", "status", "path") == {("completed", "hot"): 1}
    [(cost,)] = rows(db, "SELECT SUM(cost_usd) FROM exchanges WHERE origin='shadow'")
    assert cost > 0
    assert m.value("ember_shadow_cost_usd_total", origin="shadow") == pytest.approx(cost)


@pytest.mark.parametrize("protocol", sorted(MODELS))
async def test_memory_propose_in_an_ordinary_turn_is_refused_with_an_explanation(
    protocol: str, emulator: tuple[Emulator, str], library: ShadowLibrary
) -> None:
    """The tool is offered on every turn, so the model may call it in any: the policy helper
    answers it with a refusal the provider accepts, and nothing is proposed or saved."""
    emu, url = emulator
    app = Framework(protocol, url, library, f"refuse-{protocol}", MODELS[protocol])
    batch = {"facts": [{"content": "x", "evidence": [{"kind": "user-stated", "messageId": "m"}]}]}
    emu.script(Reply.tool_use(MEMORY_PROPOSE, batch))
    answer = await app.user("Please note down that the staging database is read-only.")
    assert len(app.refusals) == 1 and len(app.sent) == 2  # the refusal went back, then text
    assert json.dumps(OUTSIDE_SHADOW).encode()[1:-1] in emu.requests[-1].body
    assert emu.requests[-1].body == app.sent[-1]
    assert answer  # the model went on after reading the refusal
    db = database_path(library.settings, CWD)
    assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]


async def test_a_turn_that_ends_triggers_a_run_on_its_own(
    emulator: tuple[Emulator, str], library: ShadowLibrary
) -> None:
    _, url = emulator
    app = Framework("anthropic", url, library, "lib-auto", MODELS["anthropic"])
    await app.user(INTRO)
    await app.user(FACT)  # ends the turn: a run follows the debounce
    db = database_path(library.settings, CWD)
    await wait_for(lambda: rows(db, "SELECT status, trigger FROM shadow_memory_runs"))
    await wait_for(
        lambda: (
            rows(db, "SELECT status, trigger FROM shadow_memory_runs")
            == [("completed", "turn-ended")]
        )
    )


async def test_a_user_message_aborts_a_running_shadow_call(
    emulator: tuple[Emulator, str], library: ShadowLibrary
) -> None:
    """The provider never answers the shadow call; the user speaks: it is aborted at once, the
    run recorded cancelled, not one proposal written."""
    emu, url = emulator
    answer = shadow_replies()

    def hanging(body: dict[str, Any], path: str) -> Reply | None:
        reply = answer(body, path)
        return None if reply is None else reply.replace(delay_headers=60)

    emu.reply_fn = hanging
    app = Framework("anthropic", url, library, "lib-cancel", MODELS["anthropic"])
    await app.user(INTRO)
    await app.user(FACT)
    library.trigger(app.session, "manual", delay=0.0)
    db = database_path(library.settings, CWD)
    await wait_for(lambda: shadow_requests(emu))
    await wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs") == [("running",)])
    spoke = time.time()
    library.user_message(app.session)
    await wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs") == [("cancelled",)], 5)
    [(finished, error)] = rows(db, "SELECT finished_at, error FROM shadow_memory_runs")
    assert error == "interrupted-by-user" and finished - spoke < 1.0
    assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]
