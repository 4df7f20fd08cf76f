"""OpenCode, Gemini CLI, Qwen Code and aider through ember, from what they really sent.

Each recorded session (``tests/fixtures/clients``) is replayed in order, once straight to a
provider emulator and once through the proxy with every feature on and a fact in the
project's memory, with no client installed and no network. Through ember, a session must: get
the fact at the tail of the user's ask and the same bytes again on every later request (the
provider's cached prefix stays whole), keep its cache-read share within 0.01 of the direct
run, be priced and shown by the dashboard, and have a fact it states stored by shadow memory,
read hot from the client's own last request. The answers are read by the official SDKs where
a client speaks their wire format.
"""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.protocols import adapter_for_path
from ember.server import BackgroundServer
from ember.store.accounting import exchanges
from ember.testing import Emulator
from ember.testing.request_log import RequestLog
from ember.testing.shadow import Line, shadow_replies
from tests.client_fixtures import THREAD_KIND, ClientRequest, load_scenario
from tests.conftest import Stack, StackFactory
from tests.proxy.test_real_clients import NOTES_FACTS, project_db
from tests.shadow.test_e2e import rows, wait_for

SESSIONS = [
    ("opencode", "run-then-continue"),
    ("opencode", "openai-run"),
    ("qwen-code", "prompt-then-continue"),
    ("qwen-code", "anthropic-prompt"),
    ("aider", "message-then-restore"),
    ("aider", "two-turns-one-process"),
    ("aider", "anthropic-cache-prompts"),
    ("gemini-cli", "prompt-then-resume"),
    ("gemini-cli", "auto-model-prompt"),
]
#: aider re-wraps the turns it restores (``--restore-chat-history``): its second request is
#: not the first one's bytes plus more, so nothing earlier can be replayed there.
REWRITES_HISTORY = {("aider", "message-then-restore")}
BLOCK_OPEN, BLOCK_CLOSE = "<ember-memory>", "</ember-memory>"
FACT = "notes.txt in this project is the team's todo list."


def calls(client: str, scenario: str) -> list[ClientRequest]:
    return [r for r in load_scenario(client, scenario) if r.is_model_call]


def post(base: str, req: ClientRequest) -> bytes:
    headers = {
        k: v
        for k, v in req.wrapped_headers.items()
        if k not in ("host", "content-length", "connection")
    }
    url = base + req.path + (f"?{req.query}" if req.query else "")
    sent = urllib.request.Request(url, data=req.body, headers=headers, method="POST")
    with urllib.request.urlopen(sent, timeout=60) as resp:
        return resp.read()


def logged(emulator: Emulator) -> io.StringIO:
    out = io.StringIO()
    emulator.log = RequestLog(out)
    return out


def usages(log: io.StringIO) -> list[dict[str, int]]:
    """The usage the emulator answered each of the client's calls with (shadow calls left out)."""
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    return [e["usage"] for e in lines if e["shadow"] == "none" and e["usage"]]


def share(log: io.StringIO) -> float:
    """Cache read over all input of the client's calls."""
    usage = usages(log)
    read = sum(u["cache_read_tokens"] for u in usage)
    total = read + sum(u["input_tokens"] + u["cache_write_tokens"] for u in usage)
    return read / total


def later_fresh(log: io.StringIO) -> int:
    """Input not read from the cache, over every call after the first."""
    return sum(u["input_tokens"] + u["cache_write_tokens"] for u in usages(log)[1:])


def assert_cache_as_direct(via: io.StringIO, direct: io.StringIO) -> None:
    """Within 0.01 of direct; a share higher by more is allowed only when it comes from ember's
    own blocks being read from the cache (later calls pay no more fresh input than direct):
    on aider's two small asks the OpenAI cache's 128-token steps make that +0.012."""
    gained = share(via) - share(direct)
    assert gained >= -0.01
    calls = len(usages(via)) - 1
    assert gained <= 0.01 or later_fresh(via) <= later_fresh(direct) + 8 * calls


def seed(home: Path) -> None:
    with HierarchicalMemory(project_db(home), get_embedder()) as mem:
        for fact in NOTES_FACTS:
            mem.add(fact, importance=0.8)


def blocks(text: str) -> list[str]:
    out, start = [], text.find(BLOCK_OPEN)
    while start >= 0:
        end = text.index(BLOCK_CLOSE, start) + len(BLOCK_CLOSE)
        out.append(text[start:end])
        start = text.find(BLOCK_OPEN, end)
    return out


def ask_text(path: str, body: dict[str, Any]) -> str:
    adapter = adapter_for_path(path)
    assert adapter is not None
    index = adapter.latest_user_index(body)
    assert index is not None
    return adapter.user_text(body, index)


@pytest.mark.parametrize(("client", "scenario"), SESSIONS)
def test_memory_at_the_asks_tail_replayed_byte_for_byte_and_the_cache_as_direct(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    recorded = calls(client, scenario)
    direct = Emulator()
    direct_log = logged(direct)
    with BackgroundServer(direct) as up:
        for req in recorded:
            post(up.url, req)
    via = Emulator()
    via_log = logged(via)
    stack = make_stack(stages="features", emulator=via)
    seed(stack.home)
    for req in recorded:
        post(stack.url, req)
    stack.settle()
    mains = [
        (req, json.loads(got.body))
        for req, got in zip(recorded, via.requests, strict=True)
        if THREAD_KIND[req.kind] == "main"
    ]
    first_req, first = mains[0]
    [block] = blocks(json.dumps(first, ensure_ascii=False))
    assert "notes.txt in the project is the team's todo list" in block
    assert blocks(ask_text(first_req.path, first)) == [json.loads(f'"{block}"')]  # the ask's tail
    for req, body in mains[1:]:
        sent = json.dumps(body, ensure_ascii=False)
        if (client, scenario) in REWRITES_HISTORY:
            assert len(blocks(sent)) == 1, req.name
        else:
            assert blocks(sent) == [block], f"{req.name}: the block was not replayed as sent"
    assert_cache_as_direct(via_log, direct_log)


#: Sessions whose second turn is a new process: under `ember wrap` a new proxy, often.
RESUMED = [("gemini-cli", "prompt-then-resume"), ("qwen-code", "prompt-then-continue")]


@pytest.mark.parametrize(("client", "scenario"), RESUMED)
def test_a_session_resumed_under_a_new_proxy_of_the_home_keeps_its_cache(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    """Gemini CLI and Qwen Code name no session: ember derives it, with the key's tag, from
    their first words. A new proxy of the same home must derive the same one, or the memory
    injected before is not replayed and the provider's cached prefix breaks there."""
    recorded = calls(client, scenario)
    split = next(i for i, r in enumerate(recorded) if i and r.kind == "main" and _new_ask(r))
    direct, via = Emulator(), Emulator()
    direct_log, via_log = logged(direct), logged(via)
    with BackgroundServer(direct) as up:
        for req in recorded:
            post(up.url, req)
    first = make_stack(stages="features", emulator=via)
    seed(first.home)
    for req in recorded[:split]:
        post(first.url, req)
    first.settle()
    second = make_stack(stages="features", emulator=via)  # the same home, another proxy
    for req in recorded[split:]:
        post(second.url, req)
    second.settle()
    sessions = {r["session_id"] for r in exchanges(project_db(first.home))}
    assert len(sessions) == 1
    assert_cache_as_direct(via_log, direct_log)


def _new_ask(req: ClientRequest) -> bool:
    """The request opens a turn of the user's (its latest message is a new ask, not a tool's
    result)."""
    adapter = adapter_for_path(req.path)
    assert adapter is not None
    body = req.json()
    return adapter.latest_user_index(body) == adapter.turn_end(
        body
    ) - 1 and not adapter.tool_results(body)


@pytest.mark.parametrize(("client", "scenario"), SESSIONS)
def test_every_request_is_priced_and_the_dashboard_shows_the_session(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    stack = make_stack(stages="features")
    recorded = calls(client, scenario)
    for req in recorded:
        post(stack.url, req)
    stack.settle()
    found = exchanges(project_db(stack.home))
    assert len(found) == len(recorded)
    assert all(r["cost_usd"] is not None and r["cost_usd"] > 0 for r in found), found
    [project] = [p for p in _ui(stack, "projects") if p["kind"] == "project"]
    shown = _ui(stack, f"sessions?project={project['name']}")["sessions"]
    assert sum(s["requests"] for s in shown) == len(recorded)
    main = {r["session_id"] for r in found if r["thread_kind"] == "main"}
    assert main <= {s["session_id"] for s in shown}


def _ui(stack: Stack, path: str) -> Any:
    with urllib.request.urlopen(f"{stack.url}/ui/api/{path}", timeout=30) as resp:
        return json.loads(resp.read())


def _fact_of_the_ask(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
    """The model reading the session: the user's ask about notes.txt states where the todo
    list is (the recorded asks state no fact of their own)."""
    asked = [line for line in lines if line.kind == "user" and "notes.txt" in line.text]
    if not asked:
        return []
    evidence = [{"kind": "user-stated", "messageId": asked[0].id}]
    return [{"content": FACT, "category": "convention", "evidence": evidence}]


#: How shadow memory reads each session: from the client's own last request (hot), unless
#: nothing of it is cached (aider on Anthropic sends no ``cache_control`` even with
#: ``--cache-prompts`` when it has no price list) or the history restarted (aider's restored
#: chat is not the bytes it sent): then the light model reads the transcript (cold). aider's
#: first run alone is read hot.
SHADOW_READS = [
    *[(c, s, None, "hot") for c, s in SESSIONS if c != "aider"],
    ("aider", "message-then-restore", 1, "hot"),
    ("aider", "message-then-restore", None, "cold"),
    ("aider", "two-turns-one-process", None, "hot"),
    ("aider", "anthropic-cache-prompts", None, "cold"),
]


@pytest.mark.parametrize(("client", "scenario", "count", "path"), SHADOW_READS)
def test_shadow_memory_reads_the_session_and_stores_the_fact_it_states(
    make_stack: StackFactory, client: str, scenario: str, count: int | None, path: str
) -> None:
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.reply_fn = shadow_replies(_fact_of_the_ask)
    recorded = calls(client, scenario)[:count]
    for req in recorded:
        post(stack.url, req)
    db = project_db(stack.home)
    current = "SELECT content FROM memories WHERE valid_until IS NULL"
    wait_for(lambda: (FACT,) in rows(db, current), 60)
    [(read_as, read, total)] = rows(
        db,
        "SELECT path, cache_read_tokens, input_tokens + cache_read_tokens + cache_write_tokens "
        "FROM shadow_memory_runs WHERE status='completed'",
    )
    assert read_as == path
    if path == "cold":
        return
    assert read / total > 0.8  # the client's own prefix, read from the provider's cache
    forwarded = [r for r in stack.emulator.requests if b"[ember shadow turn]" not in r.body]
    last_main = [
        got for req, got in zip(recorded, forwarded, strict=True) if THREAD_KIND[req.kind] == "main"
    ][-1]
    [fork] = [r for r in stack.emulator.requests if b"[ember shadow turn]" in r.body]
    assert fork.path == last_main.path
    before = _conversation(last_main.json())
    assert _conversation(fork.json())[: len(before)] == before


def _conversation(body: dict[str, Any]) -> list[Any]:
    """The messages of a request, whatever its wire format, without cache markers (the fork
    moves the client's last marker to its own question)."""
    items = body.get("messages") or body.get("input") or body.get("contents") or []
    return [_unmarked(m) for m in items]


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


#: The fields each SDK method takes by name; the rest of a recorded body goes as ``extra_body``.
_NAMED = {
    "/v1/messages": ("model", "max_tokens", "messages", "stream"),
    "/v1/chat/completions": ("model", "messages", "stream"),
    "/v1/responses": ("model", "input", "stream"),
}


@pytest.mark.parametrize(("client", "scenario"), SESSIONS)
def test_the_official_sdk_reads_ember_s_answer_to_the_clients_first_ask(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    """The client's first ask, sent by the SDK of its wire format (Anthropic's, OpenAI's,
    Google's): the model gets the memory, and the SDK reads ember's streamed answer to its
    end."""
    stack = make_stack(stages="features")
    seed(stack.home)
    req = next(r for r in calls(client, scenario) if r.kind == "main")
    body = req.json()
    if req.path.startswith("/v1beta/"):
        text = _with_genai(stack.url, req.path, body)
        assert text.startswith("Noted: ")
        assert BLOCK_OPEN.encode() in stack.emulator.requests[-1].body
        return
    named = {k: v for k, v in body.items() if k in _NAMED[req.path]}
    extra = {k: v for k, v in body.items() if k not in named}
    headers = {k: v for k, v in req.wrapped_headers.items() if k.startswith(("x-ember-", "x-sess"))}
    options: dict[str, Any] = {"extra_body": extra, "extra_headers": headers}
    if req.path == "/v1/messages":
        with anthropic.Anthropic(base_url=stack.url, api_key="test") as claude:
            kept = {k: v for k, v in named.items() if k != "stream"}
            with claude.messages.stream(**kept, **options) as stream:
                for _ in stream:
                    pass
                text = stream.get_final_text()
    else:
        with openai.OpenAI(base_url=stack.url + "/v1", api_key="test") as gpt:
            if req.path == "/v1/chat/completions":
                chunks = gpt.chat.completions.create(**named, **options)
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            else:
                events = gpt.responses.create(**named, **options)
                text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text.startswith("Noted: ")  # the emulator's whole answer, read to its end
    assert BLOCK_OPEN.encode() in stack.emulator.requests[-1].body


def _with_genai(base: str, path: str, body: dict[str, Any]) -> str:
    """Gemini CLI's request as google-genai sends it (the body's fields read into its types)."""
    from google import genai
    from google.genai import types

    fields = {**body.get("generationConfig", {}), "systemInstruction": body["systemInstruction"]}
    config = types.GenerateContentConfig.model_validate({**fields, "tools": body["tools"]})
    model = path.split("/models/")[1].split(":")[0]
    client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=base))
    chunks = client.models.generate_content_stream(
        model=model, contents=body["contents"], config=config
    )
    return "".join(c.text or "" for c in chunks)
