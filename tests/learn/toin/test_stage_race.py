"""TOIN counts one output shape as one pattern however fast requests come.

The proxy observes an answer (``on_response``) in the background, after the client has it:
the next request, carrying the tool result, can be observed first. The result's call must
then come from the request's own history, or the result hashes without its tool name and
one shape splits into two patterns (measured: 48 + 12 of 60, neither reaching ``publish``'s
floor of 50). Each test here runs the conversation both ways and in the three wire formats.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.exchange import Exchange, Outcome
from ember.learn.toin.privacy import structure_of
from ember.learn.toin.publish import DEFAULT_MIN_OBSERVATIONS
from ember.learn.toin.stage import ToinStage
from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, JsonDoc, ProtocolAdapter
from ember.store.registry import Storage
from ember.testing import Reply
from tests.conftest import StackFactory

TOOL = "read_file"


@dataclass(frozen=True)
class Round:
    """One tool call and the output it got; ``arguments`` a string is sent as it is."""

    call_id: str
    arguments: dict[str, Any] | str
    output: str


def _text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _anthropic(rounds: list[Round]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]
    for r in rounds:
        call = {"type": "tool_use", "id": r.call_id, "name": TOOL, "input": r.arguments}
        result = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.output}
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": "reading"}, call]},
            {"role": "user", "content": [result]},
        ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}


def _anthropic_answer(r: Round) -> dict[str, Any]:
    call = {"type": "tool_use", "id": r.call_id, "name": TOOL, "input": r.arguments}
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [call],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _chat_call(r: Round) -> dict[str, Any]:
    fn = {"name": TOOL, "arguments": _text(r.arguments)}
    return {"id": r.call_id, "type": "function", "function": fn}


def _chat(rounds: list[Round]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]
    for r in rounds:
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [_chat_call(r)]},
            {"role": "tool", "tool_call_id": r.call_id, "content": r.output},
        ]
    return {"model": "gpt-5", "messages": messages}


def _chat_answer(r: Round) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [_chat_call(r)]}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-5",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def _responses_call(r: Round) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{r.call_id}",
        "call_id": r.call_id,
        "name": TOOL,
        "arguments": _text(r.arguments),
        "status": "completed",
    }


def _responses(rounds: list[Round]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]
    for r in rounds:
        output = {"type": "function_call_output", "call_id": r.call_id, "output": r.output}
        items += [_responses_call(r), output]
    return {"model": "gpt-5", "input": items}


def _responses_answer(r: Round) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": [_responses_call(r)],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@dataclass(frozen=True)
class Wire:
    adapter: ProtocolAdapter
    path: str
    headers: dict[str, str]
    request: Callable[[list[Round]], dict[str, Any]]
    answer: Callable[[Round], dict[str, Any]]


OPENAI_KEY = {"authorization": "Bearer sk-proj-x"}
WIRES = {
    "anthropic": Wire(
        ANTHROPIC, "/v1/messages", {"x-api-key": "sk-ant-api03-test"}, _anthropic, _anthropic_answer
    ),
    "openai_chat": Wire(OPENAI_CHAT, "/v1/chat/completions", OPENAI_KEY, _chat, _chat_answer),
    "openai_responses": Wire(
        OPENAI_RESPONSES, "/v1/responses", OPENAI_KEY, _responses, _responses_answer
    ),
}


def _exchange(wire: Wire, rounds: list[Round], home: Path) -> Exchange:
    return Exchange(
        wire.adapter,
        wire.path,
        "",
        wire.headers,
        JsonDoc(json.dumps(wire.request(rounds)).encode()),
        "s1",
        None,
    )


def _outcome(wire: Wire, r: Round) -> Outcome:
    return Outcome(200, "ok", wire.adapter.parse_response(wire.answer(r)), False, 1.0)


def rows(home: Path) -> list[dict[str, Any]]:
    storage = Storage(home)
    try:
        sql = "SELECT * FROM toin_patterns"
        return storage.stats().read(lambda c: [dict(r) for r in c.execute(sql)])
    finally:
        storage.close()


async def converse(wire: Wire, rounds: list[Round], home: Path, order: str) -> None:
    """Answer ``k`` makes call ``k``; request ``k + 1`` carries its result. ``order``:
    ``answer-first`` (a slow client), ``request-first`` (each next request is observed before
    the previous answer), ``one-in-five-late`` (every fifth: the mix that split 60
    observations 48 + 12), ``answers-last`` (every answer observed after every request)."""
    storage = Storage(home)
    stage = ToinStage(storage)
    late: list[tuple[Exchange, Outcome]] = []
    for k, r in enumerate(rounds):
        asked, answer = _exchange(wire, rounds[:k], home), _outcome(wire, r)
        follow_up = _exchange(wire, rounds[: k + 1], home)
        if order == "answers-last":
            await stage.on_request(follow_up)
            late.append((asked, answer))
        elif order == "request-first" or (order == "one-in-five-late" and k % 5 == 4):
            await stage.on_request(follow_up)
            await stage.on_response(asked, answer)
        else:
            await stage.on_response(asked, answer)
            await stage.on_request(follow_up)
    for asked, answer in late:
        await stage.on_response(asked, answer)
    await stage.close()
    storage.close()


def _output(n: int) -> str:
    return json.dumps({"path": f"/srv/app/f{n}.py", "lines": n, "text": "x" * n})


ORDERS = ["answer-first", "request-first", "one-in-five-late", "answers-last"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_result_observed_before_its_answer_still_has_its_call(
    tmp_path: Path, wire: str, order: str
) -> None:
    read = [{"file_path": f"/srv/app/f{n}.py"} for n in range(3)]
    rounds = [
        Round("call_0", read[0], _output(0)),
        Round("call_1", read[1], _output(1)),
        Round("call_2", read[0], _output(0)),  # the model reads f0 again: a re-fetch
        Round("call_3", read[2], _output(2)),
    ]
    await converse(WIRES[wire], rounds, tmp_path, order)
    [row] = rows(tmp_path)
    assert row["structure_hash"] == structure_of(TOOL, _output(0)).hash  # the call was known
    assert (row["kind"], row["observations"], row["refetches"]) == ("json-object", 4, 1)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses"])
async def test_a_call_with_free_text_arguments_is_one_call_from_either_side(
    tmp_path: Path, wire: str, order: str
) -> None:
    """Arguments that are no JSON object digest the same from the answer and the request,
    so the re-fetch is counted once whichever side shows the call first."""
    rounds = [
        Round("call_0", "*** Begin Patch", _output(0)),
        Round("call_1", "*** Begin Patch", _output(1)),
        Round("call_2", "", _output(2)),
        Round("call_3", "   ", _output(3)),
        Round("call_4", "[1, 2]", _output(4)),
        Round("call_5", "[1,2]", _output(5)),
    ]
    await converse(WIRES[wire], rounds, tmp_path, order)
    [row] = rows(tmp_path)
    assert (row["observations"], row["refetches"]) == (6, 3)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("wire", list(WIRES))
async def test_sixty_back_to_back_observations_are_one_publishable_pattern(
    tmp_path: Path, wire: str, order: str
) -> None:
    rounds = [Round(f"call_{n}", {"file_path": f"/srv/f{n}.py"}, _output(n)) for n in range(60)]
    await converse(WIRES[wire], rounds, tmp_path, order)
    [row] = rows(tmp_path)
    assert row["structure_hash"] == structure_of(TOOL, _output(0)).hash
    assert (row["observations"], row["refetches"]) == (60, 0)
    assert row["observations"] >= DEFAULT_MIN_OBSERVATIONS


def test_sixty_back_to_back_requests_through_the_proxy_are_one_pattern(
    make_stack: StackFactory,
) -> None:
    """The whole path: each request goes as soon as the previous answer is in, while the
    proxy may still be observing that answer in the background."""
    stack = make_stack(stages=lambda settings, storage: [ToinStage(storage)])
    stack.emulator.script(
        *(Reply.tool_use(TOOL, {"file_path": f"/srv/f{n}.py"}) for n in range(60)),
        Reply("done"),
    )
    key = {"x-api-key": "sk-ant-api03-test", "anthropic-version": "2023-06-01"}
    rounds: list[Round] = []
    with httpx2.Client(base_url=stack.url, headers=key) as client:
        for n in range(61):
            r = client.post("/v1/messages", json=_anthropic(rounds))
            assert r.status_code == 200
            if n < 60:
                call = r.json()["content"][-1]
                rounds.append(Round(call["id"], call["input"], _output(n)))
    stack.settle()
    [row] = rows(stack.home)
    assert (row["observations"], row["refetches"]) == (60, 0)
    assert row["structure_hash"] == structure_of(TOOL, _output(0)).hash


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wire=st.sampled_from(list(WIRES)),
    order=st.sampled_from(ORDERS),
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
)
def test_a_call_digests_the_same_from_the_answer_and_from_the_request(
    tmp_path: Path, wire: str, order: str, arguments: dict[str, Any]
) -> None:
    """The answer's arguments (parsed by ``json``) and the history's (the body parsed by
    orjson, which reads integers beyond 64 bits as floats) are one call: made twice, it is
    one re-fetch whichever side is observed first."""
    rounds = [Round(f"call_{n}", arguments, _output(n)) for n in range(2)]
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    asyncio.run(converse(WIRES[wire], rounds, home, order))
    [row] = rows(home)
    assert (row["observations"], row["refetches"]) == (2, 1)
