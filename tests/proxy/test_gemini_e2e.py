"""Gemini through the real proxy, with Google's official GenAI SDK as the client and the
emulator as Google: what goes through, what is accounted, what a client is answered with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from ember.config import Settings
from ember.embedder import get_embedder
from ember.exchange import Stage
from ember.memory import HierarchicalMemory
from ember.memory.stage import MemoryStage
from ember.prices import BUILTIN_PRICES
from ember.project import resolve_project
from ember.store.accounting import exchanges
from ember.store.registry import Storage
from tests.conftest import Stack, StackFactory

MODEL = "gemini-2.5-flash"
CWD = "/work/gemini-proj"
#: Gemini CLI's first user part, as it sends it: its workspace names the project.
CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "My operating system is: linux\n"
    f"- **Workspace Directories:**\n  - {CWD}\n- **Directory Structure:**\n\n"
    + "src/app.py tests/test_app.py pyproject.toml README.md\n" * 150
    + "</session_context>"
)
SYSTEM = "You are an interactive CLI agent specializing in software engineering tasks."


def client(stack: Stack, **headers: str) -> genai.Client:
    options = types.HttpOptions(base_url=stack.url, api_version="v1beta", headers=headers)
    return genai.Client(api_key="gemini-test-key", http_options=options)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def db_path(home: Path) -> Path:
    ref = resolve_project({}, None, "", [f"- **Workspace Directories:**\n  - {CWD}\n"])
    assert ref is not None and ref.identity == CWD
    return ref.db_path(home)


CONFIG = types.GenerateContentConfig(system_instruction=SYSTEM)


def test_two_turns_are_accounted_and_the_second_reads_the_implicit_cache(stack: Stack) -> None:
    gemini = client(stack)
    history: list[Any] = [user(CONTEXT), user("Where are the tests?")]
    first = gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    history += [{"role": "model", "parts": [{"text": first.text}]}, user("Run them, please.")]
    chunks = list(
        gemini.models.generate_content_stream(model=MODEL, contents=history, config=CONFIG)
    )
    assert "Run them" in "".join(c.text or "" for c in chunks)
    usage = chunks[-1].usage_metadata
    assert usage is not None and usage.cached_content_token_count
    stack.settle()
    one, two = exchanges(db_path(stack.home))
    assert (one["protocol"], one["model"], one["stream"], one["cache_read_tokens"]) == (
        "gemini",
        MODEL,
        0,
        0,
    )
    assert one["session_id"] == two["session_id"] and two["stream"] == 1
    cached, prompt = usage.cached_content_token_count, usage.prompt_token_count or 0
    assert (two["cache_read_tokens"], two["input_tokens"]) == (cached, prompt - cached)
    assert two["output_tokens"] == usage.candidates_token_count
    price = BUILTIN_PRICES[MODEL]
    expected = (
        two["input_tokens"] * price.input
        + cached * price.cache_read
        + two["output_tokens"] * price.output
    ) / 1e6
    assert two["cost_usd"] == pytest.approx(expected)
    sent = stack.emulator.requests
    assert [r.path for r in sent] == [
        f"/v1beta/models/{MODEL}:generateContent",
        f"/v1beta/models/{MODEL}:streamGenerateContent",
    ]
    assert sent[1].query_string == "alt=sse"
    assert all(r.header("x-goog-api-key") == "gemini-test-key" for r in sent)


def test_count_tokens_and_other_google_paths_pass_through_unaccounted(stack: Stack) -> None:
    gemini = client(stack)
    counted = gemini.models.count_tokens(model=MODEL, contents="How many tokens is this?")
    assert counted.total_tokens and counted.total_tokens > 0
    listed = httpx2.get(stack.url + "/v1beta/models", headers={"x-goog-api-key": "k"})
    assert listed.status_code == 404 and listed.json()["error"]["status"] == "NOT_FOUND"
    stack.settle()
    assert [r.path for r in stack.emulator.requests] == [
        f"/v1beta/models/{MODEL}:countTokens",
        "/v1beta/models",
    ]
    assert not list(stack.home.glob("projects/*/ember.db"))
    assert not (stack.home / "stats.db").exists()


def test_a_key_in_the_query_goes_to_google_and_nowhere_else(stack: Stack) -> None:
    secret = "AIzaSy" + "Q" * 33
    body = {"contents": [user(CONTEXT), user("hi")]}
    url = f"{stack.url}/v1beta/models/{MODEL}:generateContent?key={secret}"
    r = httpx2.post(url, json=body)
    assert r.status_code == 200 and r.json()["candidates"][0]["content"]["parts"]
    stack.settle()
    assert stack.emulator.requests[-1].query_string == f"key={secret}"
    [row] = exchanges(db_path(stack.home))
    assert row["protocol"] == "gemini" and row["status"] == 200
    for f in stack.home.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_errors_reach_the_sdk_in_googles_shape(make_stack: StackFactory) -> None:
    from ember.testing import Reply

    stack = make_stack()
    stack.emulator.script(Reply.error(429, "Resource has been exhausted", "RESOURCE_EXHAUSTED"))
    gemini = client(stack)
    with pytest.raises(errors.ClientError) as upstream:
        gemini.models.generate_content(model=MODEL, contents="hi")
    assert (upstream.value.code, upstream.value.status) == (429, "RESOURCE_EXHAUSTED")
    bad = httpx2.post(f"{stack.url}/v1beta/models/{MODEL}:generateContent", content=b"{nope")
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert bad.json()["error"]["message"].startswith("ember: ")
    down = make_stack(gemini_url="http://127.0.0.1:9")
    cut_off = client(down)
    with pytest.raises(errors.ServerError) as unreachable:
        cut_off.models.generate_content(model=MODEL, contents="hi")
    assert unreachable.value.code == 502 and "ember:" in (unreachable.value.message or "")
    health = httpx2.get(down.url + "/healthz").json()
    assert health["upstream"][0]["provider"] == "gemini"


def memory_only(settings: Settings, storage: Storage) -> list[Stage]:
    return [MemoryStage(settings, storage)]


def test_memory_goes_in_a_new_part_of_the_ask_and_stays_there(make_stack: StackFactory) -> None:
    stack = make_stack(stages=memory_only)
    with HierarchicalMemory(db_path(stack.home), get_embedder()) as mem:
        fact = mem.add("The tests of this project run with uv run pytest -q.", importance=0.8)
    gemini = client(stack)
    history: list[Any] = [user(CONTEXT), user("How do I run the tests of this project?")]
    first = gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    sent = json.loads(stack.emulator.requests[-1].body)
    ask, block = sent["contents"][1]["parts"]
    assert ask == {"text": "How do I run the tests of this project?"}
    assert set(block) == {"text"} and block["text"].startswith("<ember-memory>")
    assert f"[{fact.id}]" in block["text"]
    history += [{"role": "model", "parts": [{"text": first.text}]}, user("Thanks.")]
    gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    again = json.loads(stack.emulator.requests[-1].body)
    assert again["contents"][1]["parts"] == [ask, block]  # replayed, byte for byte
    assert again["contents"][3]["parts"] == [{"text": "Thanks."}]
    needle = json.dumps(block["text"], ensure_ascii=False).encode()
    assert needle in stack.emulator.requests[-1].body


def test_shaping_adds_a_part_to_the_system_instruction_and_the_cache_still_reads(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", memory_mode="off")
    gemini = client(stack)
    history: list[Any] = [user(CONTEXT), user("Fix the failing test.")]
    first = gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    history += [{"role": "model", "parts": [{"text": first.text}]}, user("And the next one.")]
    second = gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    bodies = [json.loads(r.body) for r in stack.emulator.requests]
    parts = [b["systemInstruction"]["parts"] for b in bodies]
    assert parts[0][0] == {"text": SYSTEM}  # the client's part, first and unchanged
    assert set(parts[0][1]) == {"text"} and parts[0][1]["text"].startswith("<ember_output_shaping>")
    assert parts[1] == parts[0]  # the same block every turn: the prefix the cache keys on
    assert second.usage_metadata and second.usage_metadata.cached_content_token_count
