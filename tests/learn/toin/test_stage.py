"""TOIN in the proxy: the bytes that go upstream are the bytes that came in, what it learns
lands in stats.db, and no stored row ever holds a value from a request."""

from __future__ import annotations

import asyncio
import json
import string
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.compose import build_stages
from ember.config import load_settings
from ember.exchange import Exchange, Outcome
from ember.learn.toin.stage import ToinStage
from ember.protocols import ANTHROPIC, AssembledMessage, Block, JsonDoc
from ember.store.registry import Storage
from ember.testing import Reply
from tests.conftest import StackFactory

KEY = {"x-api-key": "sk-ant-api03-test", "anthropic-version": "2023-06-01"}


def toin_only(settings: Any, storage: Storage) -> list[ToinStage]:
    return [ToinStage(storage)]


def _select(home: Path, sql: str) -> list[dict[str, Any]]:
    storage = Storage(home)
    try:
        return storage.stats().read(lambda c: [dict(r) for r in c.execute(sql)])
    finally:
        storage.close()


def rows(home: Path) -> list[dict[str, Any]]:
    return _select(home, "SELECT * FROM toin_patterns")


def meta(home: Path) -> list[dict[str, Any]]:
    return _select(home, "SELECT * FROM toin_meta")


def raw_turn(tool_id: str, output: str) -> bytes:
    """A hand-written body (odd spacing, escapes, key order) a rebuild would not reproduce."""
    return (
        b'{ "max_tokens" :64,"model":"claude-sonnet-4-5",\n  "messages":[\n'
        b'{"role":"user","content":"read it \\u00e9"},'
        b'{"role":"assistant","content":[{"type":"tool_use","id":"' + tool_id.encode() + b'",'
        b'"name":"Read","input":{"file_path":"/srv/app/config.yaml"}}]},'
        b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"'
        + tool_id.encode()
        + b'","content":'
        + json.dumps(output).encode()
        + b"}]}]  }"
    )


def test_toin_is_in_the_proxy_by_default_and_can_be_switched_off(tmp_path: Path) -> None:
    on = load_settings(env={"EMBER_HOME": str(tmp_path)})
    off = load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_TOIN": "false"})
    storage = Storage(tmp_path)
    assert any(isinstance(s, ToinStage) for s in build_stages(on, storage))
    assert not any(isinstance(s, ToinStage) for s in build_stages(off, storage))


def test_toin_cannot_change_a_request_and_counts_a_refetch(make_stack: StackFactory) -> None:
    stack = make_stack(stages=toin_only)
    read = Reply.tool_use("Read", {"file_path": "/srv/app/config.yaml"})
    stack.emulator.script(read, read, Reply("done"))
    first = (
        b'{"model":"claude-sonnet-4-5","max_tokens":64,'
        b'"messages":[{"role":"user","content":"read it \\u00e9"}]}'
    )
    r = httpx2.post(stack.url + "/v1/messages", content=first, headers=KEY)
    assert r.status_code == 200 and stack.emulator.last_request.body == first
    call = r.json()["content"][-1]["id"]
    output = json.dumps({"port": 8080, "password": "hunter2-secret"})
    second = raw_turn(call, output)
    r = httpx2.post(stack.url + "/v1/messages", content=second, headers=KEY)
    assert stack.emulator.last_request.body == second  # bytes out == bytes in
    again = r.json()["content"][-1]["id"]  # the model reads the same file again: a re-fetch
    third = raw_turn(again, output)
    httpx2.post(stack.url + "/v1/messages", content=third, headers=KEY)
    httpx2.post(stack.url + "/v1/messages", content=third, headers=KEY)  # a client retry
    assert stack.emulator.last_request.body == third
    stack.settle()
    [row] = rows(stack.home)
    assert (row["auth_mode"], row["model_family"], row["kind"]) == (
        "api_key",
        "claude-sonnet",
        "json-object",
    )
    assert row["observations"] == 2 and row["refetches"] == 1  # the retry observed nothing
    dump = json.dumps(row)
    assert "hunter2" not in dump and "8080" not in dump and "config.yaml" not in dump


def test_openai_chat_bytes_pass_untouched(make_stack: StackFactory) -> None:
    stack = make_stack(stages=toin_only)
    body = (
        b'{"model":"gpt-5","messages":[{"role":"user","content":"ls"},{"role":"assistant",'
        b'"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":'
        b'"shell","arguments":"{\\"cmd\\":\\"ls\\"}"}}]},{"role":"tool","tool_call_id":"c1",'
        b'"content":"a.txt\\nb.txt"}]}'
    )
    r = httpx2.post(
        stack.url + "/v1/chat/completions",
        content=body,
        headers={"authorization": "Bearer sk-proj-x"},
    )
    assert r.status_code == 200 and stack.emulator.last_request.body == body
    stack.settle()
    [row] = rows(stack.home)
    assert (row["auth_mode"], row["model_family"], row["kind"]) == (
        "api_key",
        "gpt-5",
        "text:lines",
    )


# --- no stored row holds a value from a request --------------------------------------------

# Values are drawn from characters that never occur in what TOIN stores (lowercase hex, its
# fixed vocabulary, JSON punctuation), so any value found in a row is a leak, not a collision.
_VALUE_CHARS = string.ascii_uppercase + "ÆØÅßЖ"
values = st.text(alphabet=_VALUE_CHARS, min_size=4, max_size=12)
json_values = st.recursive(
    values | st.integers() | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(values, inner, max_size=3),
    max_leaves=8,
)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _exchange(body: dict[str, Any], home: Path, headers: dict[str, str]) -> Exchange:
    return Exchange(
        ANTHROPIC,
        "/v1/messages",
        "",
        headers,
        JsonDoc(json.dumps(body).encode()),
        "s1",
        None,
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tool=values,
    arguments=st.dictionaries(
        values | st.sampled_from(["query", "q", "filter"]), json_values, max_size=3
    ),
    query=st.lists(st.tuples(values, values), max_size=3),
    output=json_values,
    text_output=st.lists(values, min_size=1, max_size=4),
    model=values,
    key=values,
)
def test_no_stored_row_holds_a_value_from_a_request(
    tmp_path: Path,
    tool: str,
    arguments: dict[str, Any],
    query: list[tuple[str, str]],
    output: Any,
    text_output: list[str],
    model: str,
    key: str,
) -> None:
    args = {**arguments, "query": " ".join(f"{f}:{v}" for f, v in query) + " " + key}
    calls = [Block("tool_use", id=f"id{i}", name=tool, input=args) for i in range(2)]
    contents = [json.dumps(output), "\n".join(f"{v}:{i}: {v}" for i, v in enumerate(text_output))]
    body = {
        "model": model,
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": key},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": b.id, "name": tool, "input": args} for b in calls
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": c, "is_error": i == 1}
                    for i, (b, c) in enumerate(zip(calls, contents, strict=True))
                ],
            },
        ],
    }
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    headers = {"authorization": f"Bearer {key}", "x-ember-cwd": f"/{key}"}

    async def run() -> None:
        storage = Storage(home)
        stage = ToinStage(storage)
        answer = Outcome(200, "ok", AssembledMessage("anthropic", blocks=list(calls)), False, 1.0)
        # the same calls made again (new ids, same tool and arguments): re-fetches
        again = [replace(b, id=f"again{i}") for i, b in enumerate(calls)]
        refetch = Outcome(200, "ok", AssembledMessage("anthropic", blocks=again), False, 1.0)
        stage.observe_answer(_exchange(body, home, headers), answer)
        stage.observe_request(_exchange(body, home, headers))
        stage.observe_answer(_exchange(body, home, headers), refetch)
        await stage.settle()
        storage.close()

    asyncio.run(run())
    stored = rows(home)
    assert sum(r["observations"] for r in stored) == 2
    assert sum(r["refetches"] for r in stored) == 2
    dump = json.dumps(stored) + json.dumps(meta(home))
    generated = [tool, model, key, *text_output, *(v for pair in query for v in pair)]
    generated += _strings(args) + _strings(output)
    for value in generated:
        if any(c in _VALUE_CHARS for c in value):  # a value, not a protocol word
            assert value not in dump, f"{value!r} leaked into TOIN's tables"
