"""Shadow memory on a Gemini session, through the real proxy with Google's GenAI SDK.

Session 1 (shaped as Gemini CLI sends it) states a fact and the turn ends; the shadow forks
the session's last request hot (the emulated Gemini reads the old prefix from its implicit
cache), the fact becomes a memory; session 2, in the same workspace, gets it injected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types

from ember.compose import build_storage
from ember.config import load_settings
from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import ProjectRef
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow import cursors
from ember.shadow.prefix import PrefixBook
from ember.shadow.runner import RunRequest, ShadowRunner
from ember.store.transcript_rows import Row, insert_rows
from ember.testing import Emulator
from ember.testing.shadow import shadow_replies
from tests.conftest import Stack, StackFactory
from tests.proxy.test_gemini_e2e import CONTEXT, MODEL, SYSTEM, db_path, user
from tests.shadow.test_e2e import rows, wait_for

FACT = "Remember: releases deploy to eu-west-1 through the deploy workflow on tags."


@pytest.fixture
def shadowed(make_stack: StackFactory) -> Stack:
    get_embedder()  # loaded once: session 2's ask must not wait for the model
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.reply_fn = shadow_replies()
    return stack


def ask(gemini: genai.Client, history: list[Any], text: str) -> str:
    history.append(user(text))
    config = types.GenerateContentConfig(system_instruction=SYSTEM)
    chunks = list(
        gemini.models.generate_content_stream(model=MODEL, contents=history, config=config)
    )
    answer = "".join(c.text or "" for c in chunks)
    history.append({"role": "model", "parts": [{"text": answer}]})
    return answer


def test_a_gemini_session_is_read_hot_and_its_fact_injected_in_the_next(shadowed: Stack) -> None:
    stack = shadowed
    db = db_path(stack.home)
    options = types.HttpOptions(base_url=stack.url, api_version="v1beta")
    gemini = genai.Client(api_key="gemini-test-key", http_options=options)
    history: list[Any] = [user(CONTEXT)]
    ask(gemini, history, "Let me tell you about this repo.")
    ask(gemini, history, FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs WHERE status='completed'"))
    [(path, cache_read, input_tokens)] = rows(
        db,
        "SELECT path, cache_read_tokens, input_tokens FROM shadow_memory_runs "
        "WHERE status='completed'",
    )
    assert path == "hot" and cache_read > 0 and cache_read / (cache_read + input_tokens) > 0.5
    fork = next(r for r in stack.emulator.requests if b"[ember shadow turn]" in r.body)
    assert fork.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert fork.header("x-goog-api-key") == "gemini-test-key"  # as the client, to Google
    wait_for(
        lambda: rows(db, "SELECT memory_id FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")
    )
    [(content, memory_id)] = rows(db, "SELECT content, memory_id FROM shadow_fact_proposals")
    assert "eu-west-1" in content
    origins = {r[0] for r in rows(db, "SELECT origin, protocol FROM exchanges")}
    assert origins == {"client", "shadow"}
    assert {r[0] for r in rows(db, "SELECT protocol FROM exchanges")} == {"gemini"}
    with HierarchicalMemory(db, get_embedder()) as mem:
        assert [e.kind for e in mem.evidence(memory_id)] == ["user-stated"]
    ask(gemini, [user(CONTEXT)], "Where does this project deploy to?")
    assert f"[{memory_id}]".encode() in stack.emulator.requests[-1].body


async def test_a_gemini_backlog_is_read_cold_by_geminis_light_model_with_a_google_key(
    tmp_path: Path,
) -> None:
    """No prefix to fork (after a restart, say): the light model reads the backlog, asked in
    Gemini's wire format, at Google's URL, with a Google key -- never another provider's."""
    project = ProjectRef("/home/dev/gemini-cold", "header:x-ember-cwd")
    emulator = Emulator()
    emulator.reply_fn = shadow_replies()
    with BackgroundServer(emulator) as up:
        settings = load_settings(
            env={}, home=tmp_path, gemini_url=up.url, light_api_key="google-light-key"
        )
        storage = build_storage(settings)
        db = storage.database(project.db_path(tmp_path))
        lines = ["Remember: the API listens on port 8080.", "Remember: CI runs on every push."]
        db.write(cursors.activate)
        db.write(
            lambda c: insert_rows(
                c,
                [
                    Row(f"m{i:012x}", "s", 1, i, 0, "user", "user", f"d{i}", t)
                    for i, t in enumerate(lines)
                ],
            )
        )
        db.write(
            lambda c: c.execute(
                "INSERT INTO exchanges (ts, session_id, protocol, model, status, outcome, stream, "
                "usage_known, cost_usd, price_snapshot, latency_ms) "
                "VALUES (0, 's', 'gemini', 'gemini-2.5-pro', 200, 'ok', 1, 1, 100.0, 'x', 1)"
            )
        )
        upstream = Upstream.from_settings(settings)
        runner = ShadowRunner(
            settings,
            storage,
            upstream,
            lambda adapter, path, query: settings.provider_url(adapter.name, path, query),
            PrefixBook(),
            settings.price_table(),
        )
        record = await runner.run(RunRequest("s", 1, project, "idle", "gemini"))
        await upstream.close()
        assert record is not None and record.status == "completed"
        [request] = emulator.requests
        assert request.path == "/v1beta/models/gemini-2.5-flash-lite:generateContent"
        assert request.header("x-goog-api-key") == "google-light-key"
        assert request.header("x-api-key") is None and request.header("authorization") is None
        assert "m:m000000000000" in json.loads(request.body)["contents"][0]["parts"][0]["text"]
        [(path, model, cost)] = db.read(
            lambda c: [
                tuple(r)
                for r in c.execute("SELECT path, model, estimated_usd FROM shadow_memory_runs")
            ]
        )
        assert (path, model) == ("cold", "gemini-2.5-flash-lite") and cost and cost > 0
        proposals = db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM shadow_fact_proposals").fetchone()[0]
        )
        assert proposals == 2
        storage.close()
