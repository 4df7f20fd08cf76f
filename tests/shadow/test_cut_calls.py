"""A shadow call the provider was asked is recorded with what it cost, however it ended.

A user message, a stopping proxy or a provider that breaks off can end a read mid-call; the
provider bills what it was asked all the same. The run and the call's accounting row keep the
counters the stream reported before the end (Anthropic's ``message_start`` carries the input
and cache counters), else ember's estimate, marked as one — never $0.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from ember.compose import build_storage
from ember.config import load_settings
from ember.project import ProjectRef
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow import cursors
from ember.shadow.prefix import PrefixBook
from ember.shadow.runner import RunRequest, ShadowRunner
from ember.store.transcript_rows import Row, insert_rows
from ember.testing import Emulator
from ember.testing.agent import TOOLS, system_prompt
from ember.testing.replies import Reply
from ember.testing.shadow import shadow_path, shadow_replies
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import CWD, FACT, db_path, rows, wait_for
from tests.shadow.test_websocket import STATED, codex_turn
from tests.shadow.test_websocket import db_of as codex_db

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

SESSION = "5d5d5d5d-0000-4000-8000-000000000004"
COLD = ProjectRef("/home/dev/cut-project", "header:x-ember-cwd")


def streamed_ask(stack: Stack, history: list[dict[str, Any]], text: str) -> None:
    """A turn of the session as Claude Code makes it: streamed, through the official SDK."""
    history.append({"role": "user", "content": text})
    with (
        anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0) as client,
        client.messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=system_prompt(CWD),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            messages=history,  # type: ignore[arg-type]
            metadata={"user_id": f"user_a_account_b_session_{SESSION}"},
        ) as stream,
    ):
        history.append({"role": "assistant", "content": stream.get_final_text()})


def shadow_answers(**wire: Any) -> Any:
    """The model's shadow answers, on the wire as ``wire`` says (``Reply`` options)."""
    answer = shadow_replies()

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        found = answer(body, path)
        if found is None or shadow_path(body) is None:
            return found
        return found.replace(**wire)

    return reply


def _read_started(stack: Stack) -> bool:
    return any(b"[ember shadow turn]" in r.body for r in stack.emulator.requests)


@pytest.fixture
def shadowed(make_stack: StackFactory) -> Stack:
    return make_stack(stages="features", shadow="primary", shadow_max_share=1.0)


def test_a_read_cut_by_the_users_next_message_keeps_the_providers_counters(
    shadowed: Stack,
) -> None:
    stack = shadowed
    # The answer starts (message_start: its input counters), then the model is slow.
    stack.emulator.reply_fn = shadow_answers(delay=30.0)
    history: list[dict[str, Any]] = []
    streamed_ask(stack, history, "Let me tell you about this repo. " * 40)
    streamed_ask(stack, history, FACT)
    wait_for(lambda: _read_started(stack))
    time.sleep(0.5)  # message_start reaches ember
    streamed_ask(stack, history, "Now run the tests.")  # the user speaks: the read is cut
    db = db_path(stack.home)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status = 'cancelled'"))
    stack.settle()
    [(error, reason, input_tokens, cache_read, usd)] = rows(
        db,
        "SELECT error, reason, input_tokens, cache_read_tokens, estimated_usd "
        "FROM shadow_memory_runs WHERE status = 'cancelled'",
    )
    assert error == "interrupted-by-user" and "estimated" not in reason
    assert cache_read > 0 and input_tokens > 0 and usd > 0  # the fork read the session's cache
    [(outcome, estimated, row_read, cost)] = rows(
        db,
        "SELECT outcome, usage_estimated, cache_read_tokens, cost_usd FROM exchanges "
        "WHERE origin = 'shadow' ORDER BY ts LIMIT 1",
    )
    assert (outcome, estimated, row_read, cost) == ("cancelled", 0, cache_read, usd)
    assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]


def test_a_read_the_provider_breaks_off_is_failed_and_still_costed(shadowed: Stack) -> None:
    stack = shadowed
    stack.emulator.reply_fn = shadow_answers(cut_after=2)  # message_start, then dropped
    history: list[dict[str, Any]] = []
    streamed_ask(stack, history, "Let me tell you about this repo. " * 40)
    streamed_ask(stack, history, FACT)
    db = db_path(stack.home)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status = 'failed'"))
    stack.settle()
    [(cache_read, usd)] = rows(
        db, "SELECT cache_read_tokens, estimated_usd FROM shadow_memory_runs"
    )
    assert cache_read > 0 and usd > 0
    [(status, outcome, cost)] = rows(
        db, "SELECT status, outcome, cost_usd FROM exchanges WHERE origin = 'shadow'"
    )
    assert (status, outcome, cost) == (502, "upstream_error", usd)


async def test_a_read_cut_before_the_provider_answered_is_estimated_from_the_request(
    tmp_path: Path,
) -> None:
    """A cold page cut while the model thinks (no status line yet): the provider reported
    nothing, so the page's size is the estimate, all of it fresh input, and the row says so."""
    emulator = Emulator()
    emulator.reply_fn = shadow_answers(delay_headers=60)
    with BackgroundServer(emulator) as up:
        settings = load_settings(
            env={}, home=tmp_path, anthropic_url=up.url, light_api_key="sk-ember-light"
        )
        storage = build_storage(settings)
        db = storage.database(COLD.db_path(tmp_path))
        db.write(cursors.activate)
        said = "Remember: tabs in Makefiles. " * 20
        row = Row("m000000000001", "s", 1, 0, 0, "user", "user", "d0", said)
        db.write(lambda c: insert_rows(c, [row]))
        upstream = Upstream.from_settings(settings)
        runner = ShadowRunner(
            settings,
            storage,
            upstream,
            lambda adapter, path, query: up.url + path,
            PrefixBook(),
            settings.price_table(),
        )
        task = asyncio.create_task(runner.run(RunRequest("s", 1, COLD, "idle", "anthropic")))
        for _ in range(200):
            if emulator.requests:
                break
            await asyncio.sleep(0.02)
        task.cancel()  # ember stopping
        with pytest.raises(asyncio.CancelledError):
            await task
        await upstream.close()
        storage.flush(10)

        def read(sql: str) -> list[tuple[Any, ...]]:
            return db.read(lambda c: [tuple(r) for r in c.execute(sql)])

        [(status, reason, input_tokens, cache_read, usd)] = read(
            "SELECT status, reason, input_tokens, cache_read_tokens, estimated_usd "
            "FROM shadow_memory_runs"
        )
        assert status == "cancelled" and "estimated" in reason
        assert input_tokens > len(said) // 4 and cache_read == 0 and usd > 0
        [(code, outcome, estimated, cost)] = read(
            "SELECT status, outcome, usage_estimated, cost_usd FROM exchanges "
            "WHERE origin = 'shadow'"
        )
        assert (code, outcome, estimated, cost) == (499, "cancelled", 1, usd)
        storage.close()


def codex_ask(stack: Stack, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Codex turn over HTTP through the official OpenAI SDK, streamed; returns the answer's
    output items."""
    rest = {k: v for k, v in body.items() if k not in ("model", "input", "stream")}
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key="sk-test", max_retries=0)
    with client:
        stream = client.responses.create(
            model=body["model"], input=body["input"], stream=True, extra_body=rest
        )
        done = [e for e in stream if e.type == "response.completed"]
    assert done, "the turn did not complete"
    return [o.model_dump(exclude_none=True) for o in done[0].response.output]


def test_an_openai_read_cut_before_its_usage_is_estimated_and_says_so(
    shadowed: Stack,
) -> None:
    """OpenAI reports usage only at the end of a stream: a Responses read cut by the user's
    next message is estimated — the session's prefix read from the cache, the rest fresh."""
    stack = shadowed
    stack.emulator.reply_fn = shadow_answers(delay=30.0)
    body = codex_turn(f"{STATED} Please read notes.txt and tell me what it says.")
    said = codex_ask(stack, body)
    wait_for(lambda: _read_started(stack))
    time.sleep(0.5)
    body["input"] += [*said, _user("Now run the tests.")]
    codex_ask(stack, body)  # the user speaks: the read is cut
    db = codex_db(stack)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status = 'cancelled'"))
    stack.settle()
    [(reason, cache_read, usd)] = rows(
        db,
        "SELECT reason, cache_read_tokens, estimated_usd FROM shadow_memory_runs "
        "WHERE status = 'cancelled'",
    )
    assert "estimated" in reason and cache_read > 0 and usd > 0
    [(protocol, outcome, estimated, cost)] = rows(
        db,
        "SELECT protocol, outcome, usage_estimated, cost_usd FROM exchanges "
        "WHERE origin = 'shadow' ORDER BY ts LIMIT 1",
    )
    assert (protocol, outcome, estimated, cost) == ("openai_responses", "cancelled", 1, usd)


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
