"""Shadow memory on a Gemini session, through the real proxy with Google's GenAI SDK.

Session 1 (shaped as Gemini CLI sends it) states a fact and the turn ends; the shadow forks
the session's last request hot (the emulated Gemini reads the old prefix from its implicit
cache), the fact becomes a memory; session 2, in the same workspace, gets it injected."""

from __future__ import annotations

from typing import Any

import pytest
from google import genai
from google.genai import types

from ember.memory import HierarchicalMemory
from ember.models import get_embedder
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
