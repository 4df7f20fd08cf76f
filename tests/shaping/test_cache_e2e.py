"""End to end through the proxy and the emulator: shaping never costs the prompt cache.

The same 30-request agent session (asks and tool-result turns, official SDKs) is run through
the proxy with shaping on and with shaping off, each against a fresh emulator; with shaping on
it must keep >= 99% of the cache-read tokens. Sessions that send thinking and effort fields
are included: effort is lowered on their tool-result turns while the cache stays intact.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, edits
from ember.shaping.verbosity import CLOSE_TAG, OPEN_TAG
from ember.testing.agent import ScriptedAgent, TurnUsage, session_tasks
from tests.conftest import Stack, StackFactory
from tests.shaping.sessions import chat_session, responses_session

TURNS = 30


def _stack(make_stack: StackFactory, shaping: bool) -> Stack:
    return make_stack(stages="features") if shaping else make_stack()


def claude_session(stack: Stack, **agent_options: Any) -> list[TurnUsage]:
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as client:
        agent = ScriptedAgent(client, stack.emulator, **agent_options)
        turns = agent.run(session_tasks(TURNS))
    stack.settle()
    return turns


CLAUDE_SESSIONS = {
    "plain": {},
    "thinking+effort": {
        "thinking": {"type": "enabled", "budget_tokens": 3000},
        "output_config": {"effort": "high"},
    },
    "adaptive+xhigh": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}},
}


@pytest.mark.parametrize("options", CLAUDE_SESSIONS.values(), ids=CLAUDE_SESSIONS.keys())
def test_claude_code_session_keeps_99_percent_of_cache_reads(
    make_stack: StackFactory, options: dict[str, Any]
) -> None:
    off = claude_session(_stack(make_stack, False), **options)
    shaped_stack = _stack(make_stack, True)
    on = claude_session(shaped_stack, **options)
    assert len(on) == len(off) == TURNS
    read_off = sum(t.cache_read_tokens for t in off)
    read_on = sum(t.cache_read_tokens for t in on)
    assert read_off > 0
    assert read_on >= 0.99 * read_off, (read_on, read_off)

    # and shaping really was on: one identical block on every request, effort lowered
    sent = [r.json() for r in shaped_stack.emulator.requests if r.path == "/v1/messages"]
    blocks = {edits.owned_system_block(ANTHROPIC, b, OPEN_TAG, CLOSE_TAG) for b in sent}
    assert len(blocks) == 1 and None not in blocks
    if "output_config" in options:
        kinds = [t.kind for t in on]
        efforts = [b["output_config"]["effort"] for b in sent]
        asked = options["output_config"]["effort"]
        assert efforts == [asked if k == "ask" else "low" for k in kinds]
    if "thinking" in options:
        assert all(b["thinking"] == options["thinking"] for b in sent)  # warm: never flipped


def test_chat_completions_session_keeps_99_percent_of_cache_reads(
    make_stack: StackFactory,
) -> None:
    results = {}
    for shaping in (False, True):
        stack = _stack(make_stack, shaping)
        client = openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        with client:
            results[shaping] = chat_session(
                client, stack.emulator, session_tasks(TURNS), reasoning_effort="high"
            )
        stack.settle()
    assert sum(results[False]) > 0
    assert sum(results[True]) >= 0.99 * sum(results[False])
    sent = [r.json() for r in stack.emulator.requests if r.path == "/v1/chat/completions"]
    assert len({edits.owned_system_block(OPENAI_CHAT, b, OPEN_TAG, CLOSE_TAG) for b in sent}) == 1
    assert {b["reasoning_effort"] for b in sent} == {"high", "low"}


def test_responses_session_keeps_99_percent_of_cache_reads(make_stack: StackFactory) -> None:
    results = {}
    for shaping in (False, True):
        stack = _stack(make_stack, shaping)
        client = openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0)
        with client:
            results[shaping] = responses_session(
                client, stack.emulator, session_tasks(TURNS), reasoning={"effort": "high"}
            )
        stack.settle()
    assert sum(results[False]) > 0
    assert sum(results[True]) >= 0.99 * sum(results[False])
    sent = [r.json() for r in stack.emulator.requests if r.path == "/v1/responses"]
    assert (
        len({edits.owned_system_block(OPENAI_RESPONSES, b, OPEN_TAG, CLOSE_TAG) for b in sent}) == 1
    )
    assert {b["reasoning"]["effort"] for b in sent} == {"high", "low"}
    # gpt-5: verbosity created on tool-result turns only, never on asks
    assert {b.get("text", {}).get("verbosity") for b in sent} == {None, "low"}
