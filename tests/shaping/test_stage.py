"""The shaping stage driven directly, with a controllable clock: per-session level, the budget
rule, signals wired to the controller, bounded state. (Through the real proxy: test_wired.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.config import Settings, load_settings
from ember.exchange import Exchange, Outcome
from ember.protocols import ANTHROPIC
from ember.protocols.base import AssembledMessage, Block, ProtocolAdapter, Usage
from ember.protocols.jsonedit import JsonDoc
from ember.shaping.controller import ControllerState, Signal
from ember.shaping.stage import ShapingNote, ShapingStage
from ember.shaping.verbosity import steering_text
from ember.store.registry import Storage

SYSTEM = [
    {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}
]


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def ask(text: str = "fix the bug", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], **extra}


def results(error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": error}
    return {"role": "user", "content": [block]}


def body(*messages: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": SYSTEM,
        **params,
        "messages": list(messages),
    }


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(env={"EMBER_HOME": str(tmp_path)})


_OPENED: list[Storage] = []


@pytest.fixture(autouse=True)
def _close_storages() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


class Driver:
    def __init__(self, settings: Settings, **stage_options: Any) -> None:
        self.clock = Clock()
        storage = Storage(settings.home, vec=False)  # the home's stats.db, as the proxy's
        _OPENED.append(storage)
        self.stage = ShapingStage(settings, storage=storage, clock=self.clock, **stage_options)
        self.settings = settings

    async def send(
        self, payload: dict[str, Any], session: str = "s1", adapter: ProtocolAdapter = ANTHROPIC
    ) -> tuple[dict[str, Any], ShapingNote, Exchange]:
        ex = Exchange(
            adapter,
            "/v1/messages",
            "",
            {},
            JsonDoc(json.dumps(payload).encode()),
            session,
            None,
        )
        await self.stage.on_request(ex)
        note = ex.state["shaping"]
        assert isinstance(note, ShapingNote)
        return json.loads(ex.doc.to_bytes()), note, ex

    async def answer(
        self,
        ex: Exchange,
        kind: str = "ok",
        text: str = "Done.",
        tool: bool = False,
        cache_read: int = 0,
    ) -> None:
        blocks = [Block("text", text=text)] + (
            [Block("tool_use", id="t1", name="Bash")] if tool else []
        )
        msg = AssembledMessage(
            "anthropic",
            blocks=blocks,
            complete=kind == "ok",
            usage=Usage(output_tokens=len(text) // 4 + 1, cache_read_tokens=cache_read),
        )
        await self.stage.on_response(ex, Outcome(200, kind, msg, True, 50.0, ttfb_ms=5.0))  # type: ignore[arg-type]


def block_of(sent: dict[str, Any]) -> str:
    return str(sent["system"][-1]["text"])


async def test_never_change_the_verbosity_bytes_between_turns__a_new_tail_misses_every_cached_turn(
    settings: Settings,
) -> None:
    d = Driver(settings)
    first, note, _ = await d.send(body(ask()))
    assert block_of(first) == steering_text(2) and note.source == "default"
    d.stage.controller = ControllerState(3)  # the controller moves while the session is warm
    for _ in range(3):
        d.clock.advance(120)  # within the 5-minute TTL each time
        sent, note, _ = await d.send(body(ask(), results()))
        assert block_of(sent) == block_of(first)
    other, note, _ = await d.send(body(ask()), session="s2")  # a new session: new level
    assert block_of(other) == steering_text(3) and note.source == "controller"
    d.clock.advance(301)  # idle past the TTL: the cache is gone anyway
    sent, note, _ = await d.send(body(ask()))
    assert block_of(sent) == steering_text(3)


async def test_a_one_hour_cache_keeps_the_level_for_an_hour(settings: Settings) -> None:
    d = Driver(settings)
    long_ttl = {"type": "ephemeral", "ttl": "1h"}
    system = [{**SYSTEM[0], "cache_control": long_ttl}]
    await d.send(body(ask(), system=system))
    d.stage.controller = ControllerState(1)
    d.clock.advance(600)  # 10 minutes: a 5-minute cache would be gone, this one is not
    sent, _, _ = await d.send(body(ask(), system=system))
    assert block_of(sent) == steering_text(2)
    d.clock.advance(3601)
    sent, _, _ = await d.send(body(ask(), system=system))
    assert block_of(sent) == steering_text(1)


async def test_a_one_hour_breakpoint_out_of_view_is_remembered(settings: Settings) -> None:
    d = Driver(settings)
    marked = ask("long task", **{})
    marked["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    await d.send(body(marked))  # the 1h breakpoint is at the tail when written
    history = [marked, results(), results(), results()]
    d.stage.controller = ControllerState(3)
    d.clock.advance(120)
    await d.send(body(*history))  # now out of the two messages the adapter looks at
    d.clock.advance(600)  # past 5 minutes, within the hour
    sent, _, _ = await d.send(body(*history, ask("next")))
    assert block_of(sent) == steering_text(2)


async def test_env_level_wins_and_level_zero_sends_no_block(tmp_path: Path) -> None:
    d = Driver(load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_VERBOSITY_LEVEL": "0"}))
    d.stage.controller = ControllerState(3)
    sent, note, _ = await d.send(body(ask()))
    assert sent["system"] == SYSTEM and (note.level, note.source) == (0, "env")


async def test_learned_level_from_a_verbosity_json_of_before(tmp_path: Path) -> None:
    (tmp_path / "shaping").mkdir()
    (tmp_path / "shaping" / "verbosity.json").write_text('{"level": 3}')
    d = Driver(load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_OUTPUT_AUTOTUNE": "0"}))
    sent, note, _ = await d.send(body(ask()))
    assert block_of(sent) == steering_text(3) and note.source == "learned"


async def test_never_create_an_effort_field__a_model_that_does_not_take_it_answers_400(
    settings: Settings,
) -> None:
    d = Driver(settings)
    await d.send(body(ask()))
    sent, note, _ = await d.send(body(ask(), results()))
    assert note.kind == "mechanical_continuation"
    assert "output_config" not in sent and "thinking" not in sent and note.effort_changes == ()


async def test_effort_is_lowered_on_mechanical_turns_only(settings: Settings) -> None:
    d = Driver(settings)
    high = {"output_config": {"effort": "high"}}
    sent, _, _ = await d.send(body(ask(), **high))
    assert sent["output_config"]["effort"] == "high"
    sent, note, _ = await d.send(body(ask(), results(), **high))
    assert sent["output_config"]["effort"] == "low" and note.effort_changes == ("effort",)
    sent, note, _ = await d.send(body(ask(), results(error=True), **high))
    assert sent["output_config"]["effort"] == "high" and note.kind == "error_continuation"


async def test_never_change_thinking_type__turning_thinking_off_with_thinking_in_history_400s(
    tmp_path: Path,
) -> None:
    d = Driver(load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_OUTPUT_THINKING_CLAMP": "1"}))
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 8000}}
    steps = [  # (seconds since previous request, turn, expected budget sent)
        (0, ask(), 8000),
        (10, results(), 8000),  # warm cache: the budget is in its key, never flipped
        (400, results(), 1024),  # idle past the TTL during a long tool: cold anyway, clamp
        (10, results(), 1024),  # held across the mechanical run: reads what the clamp wrote
        (10, ask("next"), 8000),  # a new ask thinks with the client's budget
        (10, results(), 8000),  # warm again: no clamp
    ]
    for wait, turn, budget in steps:
        d.clock.advance(wait)
        sent, _, _ = await d.send(body(ask(), turn, **thinking))
        assert sent["thinking"] == {"type": "enabled", "budget_tokens": budget}
    d.clock.advance(400)
    adaptive = {"thinking": {"type": "adaptive"}}
    sent, _, _ = await d.send(body(ask(), results(), **adaptive))
    assert sent["thinking"] == {"type": "adaptive"}


async def test_a_session_new_to_ember_is_not_assumed_cold_for_the_budget(
    settings: Settings,
) -> None:
    """After a proxy restart a session's first request may be a tool-result turn whose cache
    is warm: clamping there would break it."""
    d = Driver(settings)
    sent, _, _ = await d.send(
        body(ask(), results(), thinking={"type": "enabled", "budget_tokens": 8000})
    )
    assert sent["thinking"]["budget_tokens"] == 8000


async def test_control_arm_is_classified_but_untouched(tmp_path: Path) -> None:
    d = Driver(load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_OUTPUT_HOLDOUT": "1"}))
    payload = body(ask(), results(), output_config={"effort": "high"})
    _, note, ex = await d.send(payload)
    assert ex.doc.to_bytes() == json.dumps(payload).encode()
    assert note.arm == "control" and note.kind == "mechanical_continuation"


async def test_interrupts_raise_the_level_after_three_in_a_row(settings: Settings) -> None:
    d = Driver(settings)
    _, _, ex = await d.send(body(ask()))
    for _ in range(3):
        await d.answer(ex, kind="cancelled", text="Let me explain at length " * 40)
        d.clock.advance(2)
        _, note, ex = await d.send(body(ask(), ask("stop, just do it")))
        assert note.signal == Signal.TOO_MUCH
    assert d.stage.controller is not None and d.stage.controller.level == 3
    await d.answer(ex)
    assert d.stage.state.read("controller") is None  # never written per answer: at the
    await d.stage.close()  # periodic flush, or on close
    assert d.stage.state.read("controller")["level"] == 3


async def test_a_reply_faster_than_reading_is_a_fast_skip_and_a_slow_one_is_not(
    settings: Settings,
) -> None:
    d = Driver(settings)
    long_answer = "This is a long explanation of what changed and why. " * 100  # ~1300 tokens
    _, _, ex = await d.send(body(ask()))
    await d.answer(ex, text=long_answer)
    d.clock.advance(3)
    _, note, ex = await d.send(body(ask(), ask("ok next")))
    assert note.signal == Signal.TOO_MUCH
    await d.answer(ex, text=long_answer)
    d.clock.advance(600)
    _, note, _ = await d.send(body(ask(), ask("ok next")))
    assert note.signal == Signal.NEUTRAL


async def test_asking_for_more_detail_lowers_the_level_at_once(settings: Settings) -> None:
    d = Driver(settings)
    _, _, ex = await d.send(body(ask()))
    await d.answer(ex, text="Fixed.")
    d.clock.advance(30)
    _, note, _ = await d.send(body(ask(), ask("Can you explain that in more detail?")))
    assert note.signal == Signal.TOO_LITTLE
    assert d.stage.controller is not None and d.stage.controller.level == 1


async def test_tool_turns_and_unanswered_requests_feed_no_signal(settings: Settings) -> None:
    d = Driver(settings)
    _, _, ex = await d.send(body(ask()))
    await d.answer(ex, tool=True)
    _, note, _ = await d.send(body(ask(), results()))
    assert note.signal is None
    _, note, _ = await d.send(body(ask(), ask("another")))  # previous not answered yet
    assert note.signal is None and d.stage.controller is None


async def test_per_session_state_is_bounded(settings: Settings) -> None:
    d = Driver(settings, capacity=3)
    for i in range(10):
        await d.send(body(ask()), session=f"s{i}")
    assert len(d.stage.sessions) == 3
    assert d.stage.sessions.peek("s9") is not None and d.stage.sessions.peek("s0") is None


async def test_shaping_off_forwards_untouched_and_feeds_the_baseline(tmp_path: Path) -> None:
    d = Driver(load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_OUTPUT_SHAPING": "false"}))
    payload = body(ask(), results(), output_config={"effort": "high"})
    _, note, ex = await d.send(payload)
    assert ex.doc.to_bytes() == json.dumps(payload).encode() and note.arm == "off"
    await d.answer(ex, text="x" * 400)
    await d.stage.close()
    baseline = d.stage.state.read("verbosity")["baseline"]
    assert baseline == {note.stratum: [1, 101.0, 0.0]}


async def test_a_failed_request_after_an_effort_change_does_not_stop_routing(
    settings: Settings,
) -> None:
    """A 429 reads nothing from the cache; blaming the effort change for it would switch
    effort routing off for no reason."""
    d = Driver(settings)
    high = {"output_config": {"effort": "high"}}
    _, _, ex = await d.send(body(ask(), **high))
    await d.answer(ex, tool=True, cache_read=20_000)
    _, note, ex = await d.send(body(ask(), results(), **high))
    assert note.effort_changes == ("effort",)
    failed = Outcome(429, "upstream_error", None, False, 5.0)
    await d.stage.on_response(ex, failed)
    assert d.stage.effort_disabled == set()
    _, note, ex = await d.send(body(ask(), results(), results(), **high))
    assert note.effort_changes == ("effort",)
    await d.answer(ex, tool=True, cache_read=20_000)
    _, _, ex = await d.send(body(ask(), ask("next"), **high))  # effort back to "high"
    await d.answer(ex, cache_read=2_000)  # answered, and it missed: that is evidence
    assert d.stage.effort_disabled == {"claude-sonnet-4-5"}


async def test_echo_is_sampled_by_time_under_heavy_traffic(settings: Settings) -> None:
    d = Driver(settings)
    echoed = "the quick brown fox jumps over the lazy dog again and again"
    for step in (0.0, 0.01, 0.01, 1.0):  # three answers in 20 ms, then one a second later
        d.clock.advance(step)
        _, _, ex = await d.send(body(ask(echoed)))
        await d.answer(ex, text=echoed)
    d.stage.recorder.flush()
    stats = d.stage.state.read("ledger")["echo"]
    assert sum(v[0] for v in stats.values()) == 2  # the first and the last were measured
