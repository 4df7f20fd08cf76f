"""Shaping wired into the real proxy: signals from real traffic, the holdout arm, the savings
ledger, and the cache guard against a provider whose cache key includes effort."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

import ember.testing.prompt_anthropic as prompt_anthropic
from ember.config import load_settings
from ember.shaping.controller import Signal
from ember.shaping.recorder import read_state
from ember.shaping.stage import ShapingStage
from ember.strata import assign_arm
from ember.testing import Reply
from ember.testing.agent import ScriptedAgent, session_tasks, system_prompt
from ember.testing.tokens import canonical_json
from tests.conftest import Stack, StackFactory

MODEL = "claude-sonnet-4-5"
META = {"user_id": "user_u_account_a_session_11111111-2222-3333-4444-555555555555"}


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def shaped(make_stack: StackFactory, tmp_path: Path, **env: str) -> tuple[Stack, ShapingStage]:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path / "home"), **env})
    stage = ShapingStage(settings)
    return make_stack(stages=[stage]), stage


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_a_cancelled_stream_then_a_new_message_is_an_interrupt(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    stack, stage = shaped(make_stack, tmp_path)
    stack.emulator.script(Reply("A long and thorough explanation. " * 200, delay=0.01))
    history = [user("Explain the auth module.")]
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
        with client.messages.stream(
            model=MODEL,
            max_tokens=4096,
            system=system_prompt("/w"),
            messages=history,
            metadata=META,
        ) as stream:
            for _ in stream:
                break  # the user pressed Esc: the client hangs up mid-answer
        session = stage.sessions.peek(META["user_id"].rsplit("_", 1)[1])
        assert session is not None
        wait_until(lambda: (n := session.notes.get(1)) is not None and n.answer is not None)
        assert session.notes[1].answer is not None
        assert session.notes[1].answer.outcome == "cancelled"
        history += [{"role": "assistant", "content": "A long"}, user("Stop. Just fix it.")]
        client.messages.create(
            model=MODEL,
            max_tokens=4096,
            system=system_prompt("/w"),
            messages=history,
            metadata=META,
        )
    stack.settle()
    assert stage.controller is not None
    assert stage.controller.up_streak == 1 and stage.controller.observations == 1
    assert session.notes[2].answer is not None


def test_holdout_sessions_are_forwarded_byte_for_byte_and_both_arms_recorded(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    stack, stage = shaped(make_stack, tmp_path, EMBER_OUTPUT_HOLDOUT="0.5")
    sent: dict[str, bytes] = {}
    for i in range(30):  # 30 sessions: both arms, and more than one flush of 25
        sid = f"session-{i}"
        sent[sid] = json.dumps(
            {
                "model": MODEL,
                "max_tokens": 512,
                "system": "be brief",
                "output_config": {"effort": "high"},
                "messages": [user(f"task {i}")],
            }
        ).encode()
        r = httpx2.post(
            stack.url + "/v1/messages",
            content=sent[sid],
            headers={"x-ember-session-id": sid, "x-api-key": "k"},
        )
        assert r.status_code == 200
    stack.settle()
    received = [r.body for r in stack.emulator.requests]
    arms = {sid: assign_arm(sid, 0.5) for sid in sent}
    assert set(arms.values()) == {"treatment", "control"}
    for sid, raw in sent.items():
        # control: the very bytes the client sent; treatment: shaped
        assert (raw in received) == (arms[sid] == "control"), sid
    deadline = time.monotonic() + 10  # flushed at 25, the rest by the 2-second timer
    while (recorded := _recorded(stage)) < 30 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert recorded == 30
    ledger = read_state(stage.state).ledger
    assert ledger.control and ledger.treatment


def _recorded(stage: ShapingStage) -> int:
    ledger = read_state(stage.state).ledger
    return sum(s.n for s in ledger.treatment.values()) + sum(s.n for s in ledger.control.values())


@pytest.fixture
def effort_in_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the emulator behave like a provider whose message-cache key includes effort."""
    original = prompt_anthropic._salt

    def salt(body: dict[str, Any]) -> bytes:
        return original(body) + canonical_json(body.get("output_config")).encode()

    monkeypatch.setattr(prompt_anthropic, "_salt", salt)


@pytest.mark.usefixtures("effort_in_cache_key")
def test_effort_routing_stops_once_a_changed_effort_is_seen_to_cost_the_cache(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    reads = {}
    for shaping in (False, True):
        stack, stage = shaped(make_stack, tmp_path, EMBER_OUTPUT_SHAPING=str(shaping).lower())
        with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
            agent = ScriptedAgent(client, stack.emulator, output_config={"effort": "high"})
            turns = []
            for task in session_tasks(30):
                turns += agent.run([task])
                stack.settle()  # the guard runs on the answer; let it before the next ask
        reads[shaping] = sum(t.cache_read_tokens for t in turns)
    efforts = [r.json()["output_config"]["effort"] for r in stack.emulator.requests]
    assert stage.effort_disabled == {MODEL}
    # flips that cost less than CACHE_MISS_TOKENS each go unnoticed (early turns, small
    # history); the first that costs more stops routing for the rest of the process
    assert 1 <= efforts.count("low") <= 6
    assert efforts[-10:] == ["high"] * 10
    assert reads[True] >= 0.9 * reads[False]  # what the probe cost, bounded


def test_signals_from_a_real_session_reach_the_controller_file(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    stack, stage = shaped(make_stack, tmp_path)
    history: list[dict[str, Any]] = []
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
        for text in ("What does the cache module do?", "Can you explain that in more detail?"):
            history.append(user(text))
            msg = client.messages.create(
                model=MODEL, max_tokens=1024, system="be brief", messages=history, metadata=META
            )
            history.append({"role": "assistant", "content": msg.content[0].text})  # type: ignore[union-attr]
            stack.settle()
    assert stage.controller is not None and stage.controller.level == 1
    saved = stage.state.read("controller")
    assert saved["level"] == 1 and saved["cooldown"] == 5
    assert Signal.TOO_LITTLE.value == "too_little"


def test_a_stream_that_failed_midway_is_not_learned_from_as_an_answer(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    """An ``overloaded_error`` event after a 200 used to count as a (very short) answer in the
    savings ledger and as a finished turn for the controller."""
    stack, stage = shaped(make_stack, tmp_path)
    stack.emulator.script(Reply.failing("overloaded_error", "Overloaded", after=6), Reply("Ok."))
    history = [user("Explain the cache module.")]
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
        with (
            pytest.raises(anthropic.APIStatusError),
            client.messages.stream(
                model=MODEL, max_tokens=1024, system="be brief", messages=history, metadata=META
            ) as stream,
        ):
            stream.until_done()
        stack.settle()
        client.messages.create(
            model=MODEL, max_tokens=1024, system="be brief", messages=history, metadata=META
        )
    stack.settle()
    session = stage.sessions.peek(META["user_id"].rsplit("_", 1)[1])
    assert session is not None
    failed, answered = session.notes[1], session.notes[2]
    assert failed.answer is not None and failed.answer.outcome == "stream_error"
    assert not failed.answer.handed_back and not failed.usage_known
    assert answered.answer is not None and answered.answer.outcome == "ok"
    stage.recorder.flush()
    ledger = read_state(stage.state).ledger
    recorded = sum(s.n for s in ledger.treatment.values())
    recorded += sum(s.n for s in ledger.control.values())
    assert recorded == 1  # the answer that came through, not the failed one
