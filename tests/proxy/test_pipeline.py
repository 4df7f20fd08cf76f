"""Stages plug into the proxy without touching the handlers, and fail open."""

from __future__ import annotations

import json

import anthropic
import httpx2

from ember.exchange import Exchange, Outcome, Stage
from ember.protocols import edits
from ember.testing import Reply
from tests.conftest import StackFactory

RAW = (
    b'{"model":"claude-sonnet-4-5","max_tokens":64,\n "system": [{"type":"text",'
    b'"text":"sys","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user",'
    b'"content":"hello \\u00e9"}]}'
)


class TailStage(Stage):
    name = "tail"

    async def on_request(self, ex: Exchange) -> None:
        edits.put_system_block(ex.adapter, ex.doc, "<t>", "</t>", "EMBER TAIL")


class Recorder(Stage):
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[Exchange, Outcome]] = []

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        self.seen.append((ex, outcome))


class Broken(Stage):
    name = "broken"

    async def on_request(self, ex: Exchange) -> None:
        edits.put_system_block(ex.adapter, ex.doc, "<t>", "</t>", "half-done edit")
        raise RuntimeError("bug in a feature")

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        raise RuntimeError("bug after the answer")


def test_a_stage_edit_changes_only_the_bytes_it_adds(make_stack: StackFactory) -> None:
    stack = make_stack(stages=[TailStage()])
    r = httpx2.post(stack.url + "/v1/messages", content=RAW)
    assert r.status_code == 200
    sent = stack.emulator.last_request.body
    cut = RAW.index(b"}],")  # end of the last system block
    assert sent[: cut + 1] == RAW[: cut + 1]
    assert sent[cut + 1 :].startswith(b',{"type":"text","text":"EMBER TAIL"}]')
    assert sent.endswith(RAW[cut + 2 :])


def test_a_failing_stage_is_rolled_back_and_the_request_goes_through(
    make_stack: StackFactory,
) -> None:
    rec = Recorder()
    stack = make_stack(stages=[Broken(), rec])
    r = httpx2.post(stack.url + "/v1/messages", content=RAW)
    assert r.status_code == 200
    assert stack.emulator.last_request.body == RAW  # not even the half-done edit
    stack.settle()
    assert len(rec.seen) == 1  # later stages still ran


def test_the_tee_assembles_what_the_sdk_assembled(make_stack: StackFactory) -> None:
    rec = Recorder()
    stack = make_stack(stages=[rec])
    stack.emulator.script(Reply("Checking.", [("grep", {"q": "TODO"})], thinking="think first"))
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c,
        c.messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=2048,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "todo?"}],
        ) as s,
    ):
        final = s.get_final_message()
    stack.settle()
    ex, outcome = rec.seen[-1]
    msg = outcome.message
    assert msg is not None and msg.complete and outcome.streamed and outcome.kind == "ok"
    assert [b.type for b in msg.blocks] == [b.type for b in final.content]
    assert msg.blocks[0].signature == final.content[0].signature  # type: ignore[union-attr]
    assert msg.blocks[2].input == {"q": "TODO"}
    assert msg.usage is not None and msg.usage.output_tokens == final.usage.output_tokens
    assert msg.stop_reason == "tool_use"
    assert ex.model == "claude-sonnet-4-5" and outcome.ttfb_ms is not None


def test_session_and_project_are_resolved_for_stages(make_stack: StackFactory) -> None:
    rec = Recorder()
    stack = make_stack(stages=[rec])
    body = json.loads(RAW)
    body["metadata"] = {"user_id": "user_ab_account_cd_session_11111111-2222"}
    body["system"][0]["text"] = "<env>\nWorking directory: /home/me/acme\n</env>"
    httpx2.post(stack.url + "/v1/messages", json=body)
    stack.settle()
    ex, _ = rec.seen[-1]
    assert ex.session_id == "11111111-2222"
    assert ex.project is not None and ex.project.identity == "/home/me/acme"
