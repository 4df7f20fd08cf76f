"""The shadow fork on the wire: a recorded request, continued by its answer, placeholder
results and one question, must keep every byte the provider's cache keys on.

One wire test per format, on real recorded requests where there are some (Claude Code,
Codex) and a hand-written Chat body full of bytes a re-serialising proxy would change. Each
checks the bytes, what was appended (written out by hand, not by the code under test), and
that the providers' cache models (``ember.testing.cache_model``) read the recorded prefix back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, adapter_for_path
from ember.protocols.base import AssembledMessage, Block, ProtocolAdapter
from ember.protocols.breakpoints import MAX_BREAKPOINTS, breakpoints
from ember.protocols.forking import ForkRefused, answer_refusal, fork_eligibility, fork_request
from ember.protocols.jsonedit import locate
from ember.protocols.replay import PLACEHOLDER
from ember.testing.cache_model import AnthropicCache, OpenAICache
from ember.testing.prompt_anthropic import parse_prompt
from ember.testing.prompt_openai import chat_tokens, responses_tokens
from tests.client_fixtures import ClientRequest, all_requests
from tests.protocols.fork_support import (
    ANTHROPIC_TURN,
    CHAT_TURN,
    CUSTOM_CALL,
    FUNCTION_CALL,
    MESSAGE,
    QUESTION,
    REASONING,
    RESPONSES_OUTPUT,
    TEXT,
    anthropic_answer_sse,
    assemble,
    block_delta,
    block_start,
    block_stop,
    chat_answer_sse,
    chat_body,
    responses_answer_sse,
    spans,
    sse,
)


def main_requests(client: str) -> list[ClientRequest]:
    return [r for r in all_requests() if r.client == client and r.kind == "main"]


def count_breakpoints(body: dict[str, Any]) -> int:
    return len(breakpoints(body)) + (1 if isinstance(body.get("cache_control"), dict) else 0)


def assert_only_conversation_changed(recorded: bytes, forked: bytes, key: str) -> None:
    """Every other top-level value byte-equal, in the same order; the conversation array's
    recorded bytes a prefix of the fork's (nothing before its end moved)."""
    old, new = spans(recorded), spans(forked)
    assert list(old) == list(new)
    for name in old:
        if name != key:
            assert new[name] == old[name], f"{name} changed"
    text = recorded.decode()
    _, end = locate(text, [key])
    assert forked.decode().startswith(text[: end - 1]), "a recorded message changed"


def anthropic_cache_reads(recorded: bytes, forked: bytes) -> tuple[int, int]:
    """(tokens of the recorded prompt its breakpoints cached, tokens the fork reads from the
    cache it left). A note Claude Code sends after its ask (``[user, system]``) comes after
    its last breakpoint: never cached by the client, so no fork can read it."""
    cache = AnthropicCache()
    first = cache.evaluate(json.loads(recorded), now=0.0)
    fork = cache.evaluate(json.loads(forked), now=30.0)
    cached = first.cache_creation_input_tokens + first.cache_read_input_tokens
    return cached, fork.cache_read_input_tokens


# -- Anthropic: Claude Code's own requests --------------------------------------------------


@pytest.mark.parametrize("request_", main_requests("claude-code"), ids=lambda r: r.name)
def test_claude_code_fork_changes_nothing_but_the_appended_turns(request_: ClientRequest) -> None:
    answer = assemble(ANTHROPIC, anthropic_answer_sse())
    forked = fork_request(ANTHROPIC, request_.body, answer, QUESTION)

    assert_only_conversation_changed(request_.body, forked, "messages")
    old, new = request_.json()["messages"], json.loads(forked)["messages"]
    assert new[: len(old)] == old  # Claude Code already marks its last block: nothing added
    placeholder = {"type": "tool_result", "tool_use_id": "toolu_shadow_1", "content": PLACEHOLDER}
    question = {"type": "text", "text": QUESTION}
    assert new[len(old) :] == [ANTHROPIC_TURN, {"role": "user", "content": [placeholder, question]}]
    turn = ANTHROPIC.turn_end(request_.json())  # before a trailing system note, if any
    assert new[turn - 1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert count_breakpoints(json.loads(forked)) <= MAX_BREAKPOINTS


@pytest.mark.parametrize("request_", main_requests("claude-code"), ids=lambda r: r.name)
def test_claude_code_fork_reads_the_whole_recorded_prompt_from_cache(
    request_: ClientRequest,
) -> None:
    answer = assemble(ANTHROPIC, anthropic_answer_sse())
    forked = fork_request(ANTHROPIC, request_.body, answer, QUESTION)
    total, read = anthropic_cache_reads(request_.body, forked)
    assert read == total > 0


def test_streamed_answer_replays_u2028_and_signature_exactly() -> None:
    """Assembled from SSE split every 3 bytes (inside UTF-8 sequences and lines)."""
    answer = assemble(ANTHROPIC, anthropic_answer_sse(), chunk=3)
    recorded = main_requests("claude-code")[0].body
    forked = json.loads(fork_request(ANTHROPIC, recorded, answer, QUESTION))
    thinking, redacted, text, call = forked["messages"][-2]["content"]
    assert text["text"] == TEXT and "\u2028" in text["text"]
    assert thinking == ANTHROPIC_TURN["content"][0] and redacted == ANTHROPIC_TURN["content"][1]
    assert call["input"] == ANTHROPIC_TURN["content"][3]["input"]


# -- Anthropic: where the breakpoint goes ---------------------------------------------------

LONG = " ".join(f"word{i}" for i in range(1500))


def anthropic_body(
    marks: dict[str, Any], last: Any = None, automatic: Any = None
) -> dict[str, Any]:
    """``marks``: region name -> marker for tools[0], system[0], system[1], messages[0]."""

    def marked(block: dict[str, Any], region: str) -> dict[str, Any]:
        return {**block, "cache_control": marks[region]} if region in marks else block

    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "tools": [marked({"name": "Bash", "input_schema": {"type": "object"}}, "tools")],
        "system": [
            marked({"type": "text", "text": "You are a coding agent. " + LONG}, "system0"),
            marked({"type": "text", "text": "Project rules. " + LONG}, "system1"),
        ],
        "messages": [
            {
                "role": "user",
                "content": [marked({"type": "text", "text": "Hello " + LONG}, "msg0")],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
            {"role": "user", "content": last or [{"type": "text", "text": "Go on."}]},
        ],
    }
    if automatic is not None:
        body["cache_control"] = automatic
    return body


def text_answer() -> AssembledMessage:
    return AssembledMessage("anthropic", blocks=[Block("text", text="Done.")], complete=True)


def fork_of(body: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    recorded = json.dumps(body, indent=1).encode()  # whitespace the fork must keep
    forked = fork_request(ANTHROPIC, recorded, text_answer(), QUESTION)
    return recorded, json.loads(forked)


EPH = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def test_unmarked_last_message_gets_a_breakpoint_and_nothing_else_changes() -> None:
    body = anthropic_body({"system1": EPH})
    recorded, forked = fork_of(body)
    old_last = forked["messages"][2]
    assert old_last == {
        "role": "user",
        "content": [{"type": "text", "text": "Go on.", "cache_control": EPH}],
    }
    assert forked["messages"][:2] == body["messages"][:2]
    old, new = spans(recorded), spans(fork_request(ANTHROPIC, recorded, text_answer(), QUESTION))
    assert list(new) == list(old)
    assert all(new[k] == old[k] for k in old if k != "messages")


def test_added_breakpoint_makes_the_next_fork_read_the_whole_prefix() -> None:
    """The recorded request cached only its system prompt; the first fork writes the old
    prefix at its new breakpoint, so a second fork of the same prefix reads all of it."""
    recorded = json.dumps(anthropic_body({"system1": EPH})).encode()
    forked = fork_request(ANTHROPIC, recorded, text_answer(), QUESTION)
    cache = AnthropicCache()
    cache.evaluate(json.loads(recorded), now=0.0)
    first = cache.evaluate(json.loads(forked), now=10.0)
    second = cache.evaluate(json.loads(forked), now=20.0)
    prompt = parse_prompt(json.loads(recorded))
    assert first.cache_read_input_tokens == prompt.cumulative[prompt.breakpoints[-1].index]
    assert second.cache_read_input_tokens > first.cache_read_input_tokens


def test_new_breakpoint_copies_one_hour_ttl_so_the_api_accepts_the_order() -> None:
    _, forked = fork_of(anthropic_body({"system0": HOUR, "system1": HOUR}))
    assert forked["messages"][2]["content"][-1]["cache_control"] == HOUR
    AnthropicCache().evaluate(forked, now=0.0)  # raises on a 1h marker after a 5m one


def test_new_breakpoint_after_a_five_minute_one_stays_five_minutes() -> None:
    """A 1h marker after a 5m one is refused with a 400."""
    _, forked = fork_of(anthropic_body({"system0": HOUR, "msg0": EPH}))
    assert forked["messages"][2]["content"][-1]["cache_control"] == EPH
    AnthropicCache().evaluate(forked, now=0.0)


def test_fifth_breakpoint_drops_the_earliest_and_keeps_the_cache_read() -> None:
    body = anthropic_body({"tools": EPH, "system0": EPH, "system1": EPH, "msg0": EPH})
    _, forked = fork_of(body)
    assert count_breakpoints(forked) == MAX_BREAKPOINTS
    assert "cache_control" not in forked["tools"][0]
    assert forked["tools"][0] == {k: v for k, v in body["tools"][0].items() if k != "cache_control"}
    assert forked["messages"][2]["content"][-1]["cache_control"] == EPH
    cache = AnthropicCache()
    cache.evaluate(body, now=0.0)
    usage = cache.evaluate(forked, now=10.0)  # would raise with five markers
    prompt = parse_prompt(body)
    assert usage.cache_read_input_tokens == prompt.cumulative[prompt.breakpoints[-1].index]


def test_fifth_breakpoint_counts_the_automatic_one() -> None:
    body = anthropic_body({"tools": EPH, "system0": EPH, "system1": EPH}, automatic=EPH)
    _, forked = fork_of(body)
    assert count_breakpoints(forked) == MAX_BREAKPOINTS
    assert "cache_control" not in forked["tools"][0]
    AnthropicCache().evaluate(forked, now=0.0)


def test_string_content_becomes_one_marked_text_block_with_the_same_cache_identity() -> None:
    body = anthropic_body({"system1": EPH}, last="Go on.")
    body["messages"][2]["content"] = "Go on."
    recorded, forked = fork_of(body)
    assert forked["messages"][2]["content"] == [
        {"type": "text", "text": "Go on.", "cache_control": EPH}
    ]
    cache = AnthropicCache()
    cache.evaluate(forked, now=0.0)
    again = fork_request(ANTHROPIC, recorded, text_answer(), "Another question?")
    assert cache.evaluate(json.loads(again), now=5.0).cache_read_input_tokens == (
        parse_prompt(body).total_tokens
    )


# -- OpenAI Chat ----------------------------------------------------------------------------


def test_chat_fork_keeps_the_bytes_and_appends_answer_placeholder_question() -> None:
    recorded = chat_body()
    answer = assemble(OPENAI_CHAT, chat_answer_sse())
    forked = fork_request(OPENAI_CHAT, recorded, answer, QUESTION)

    assert_only_conversation_changed(recorded, forked, "messages")
    old, new = json.loads(recorded)["messages"], json.loads(forked)["messages"]
    assert new[: len(old)] == old
    assert new[len(old) :] == [
        CHAT_TURN,
        {"role": "tool", "tool_call_id": "call_shadow_1", "content": PLACEHOLDER},
        {"role": "user", "content": QUESTION},
    ]


def test_chat_fork_reads_the_recorded_prompt_from_the_automatic_cache() -> None:
    recorded = chat_body()
    forked = fork_request(OPENAI_CHAT, recorded, assemble(OPENAI_CHAT, chat_answer_sse()), QUESTION)
    cache = OpenAICache()
    tokens = chat_tokens(json.loads(recorded))
    cache.evaluate("gpt-4.1", tokens, now=0.0)
    cached = cache.evaluate("gpt-4.1", chat_tokens(json.loads(forked)), now=30.0)
    assert len(tokens) >= cache.minimum
    assert cached == cache.minimum + (len(tokens) - cache.minimum) // cache.step * cache.step


@pytest.mark.parametrize(
    ("stream", "options"),
    [
        ('"stream": true,', {"include_usage": True}),  # the SDK's default stream=True
        ('"stream": true, "stream_options": null,', {"include_usage": True}),
        ('"stream": true, "stream_options": {"include_usage": false},', {"include_usage": True}),
        (
            '"stream": true, "stream_options": {"include_obfuscation": false},',
            {"include_obfuscation": False, "include_usage": True},
        ),
    ],
    ids=["no-options", "null", "false", "other-option"],
)
def test_a_streamed_chat_fork_asks_for_its_usage_and_the_cache_still_reads_the_prefix(
    stream: str, options: dict[str, Any]
) -> None:
    """Without ``include_usage`` the API streams no usage, and the fork's row said 0 tokens at
    no cost. Asking for it is no part of the prompt: the cache reads what it read before."""
    recorded = chat_body(stream=stream)
    forked = fork_request(OPENAI_CHAT, recorded, assemble(OPENAI_CHAT, chat_answer_sse()), QUESTION)
    assert json.loads(forked)["stream_options"] == options
    old, new = spans(recorded), spans(forked)
    for name in old:
        if name not in ("messages", "stream_options"):
            assert new[name] == old[name], f"{name} changed"
    tokens = chat_tokens(json.loads(recorded))
    assert chat_tokens(json.loads(forked))[: len(tokens)] == tokens
    cache = OpenAICache()
    cache.evaluate("gpt-4.1", tokens, now=0.0)
    cached = cache.evaluate("gpt-4.1", chat_tokens(json.loads(forked)), now=30.0)
    assert cached == cache.minimum + (len(tokens) - cache.minimum) // cache.step * cache.step


def test_a_chat_fork_that_is_not_a_stream_gets_no_stream_options() -> None:
    """A JSON answer always holds its usage; the API refuses stream_options without a stream."""
    recorded = chat_body(stream='"stream": false,')
    forked = fork_request(OPENAI_CHAT, recorded, assemble(OPENAI_CHAT, chat_answer_sse()), QUESTION)
    assert "stream_options" not in json.loads(forked)
    assert_only_conversation_changed(recorded, forked, "messages")


# -- OpenAI Responses: Codex's own requests -------------------------------------------------


def responses_tail() -> list[dict[str, Any]]:
    return [
        {"type": "function_call_output", "call_id": "call_shadow_1", "output": PLACEHOLDER},
        {"type": "custom_tool_call_output", "call_id": "call_shadow_2", "output": PLACEHOLDER},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
    ]


@pytest.mark.parametrize("final_output", [True, False], ids=["completed-output", "items-only"])
@pytest.mark.parametrize("request_", main_requests("codex"), ids=lambda r: r.name)
def test_codex_fork_replays_every_output_item_verbatim(
    request_: ClientRequest, final_output: bool
) -> None:
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse(final_output=final_output))
    forked = fork_request(OPENAI_RESPONSES, request_.body, answer, QUESTION)

    assert_only_conversation_changed(request_.body, forked, "input")
    old, new = request_.json()["input"], json.loads(forked)["input"]
    assert new[: len(old)] == old
    assert new[len(old) :] == [*RESPONSES_OUTPUT, *responses_tail()]


@pytest.mark.parametrize("request_", main_requests("codex"), ids=lambda r: r.name)
def test_codex_fork_reads_the_recorded_prompt_from_the_automatic_cache(
    request_: ClientRequest,
) -> None:
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse())
    forked = fork_request(OPENAI_RESPONSES, request_.body, answer, QUESTION)
    cache, key = OpenAICache(), request_.json()["prompt_cache_key"]
    tokens = responses_tokens(request_.json())
    cache.evaluate("gpt-5.1", tokens, now=0.0, cache_key=key)
    cached = cache.evaluate(
        "gpt-5.1", responses_tokens(json.loads(forked)), now=30.0, cache_key=key
    )
    assert len(tokens) >= cache.minimum
    assert cached == cache.minimum + (len(tokens) - cache.minimum) // cache.step * cache.step


def responses_request(**fields: Any) -> bytes:
    body = {"model": "gpt-5.1", "input": [{"role": "user", "content": "Fix the test."}], **fields}
    return json.dumps(body, indent=2).encode()


def test_previous_response_id_fork_continues_from_the_answer_with_only_the_new_items() -> None:
    """The conversation lives on the server: the fork points at the answer's own response
    (which holds the recorded input and the answer) and sends only what follows it."""
    recorded = responses_request(previous_response_id="resp_before", store=True, stream=True)
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse())
    forked = fork_request(OPENAI_RESPONSES, recorded, answer, QUESTION)
    body = json.loads(forked)
    assert body["previous_response_id"] == "resp_shadow_1"
    assert body["input"] == responses_tail()
    old, new = spans(recorded), spans(forked)
    assert all(new[k] == old[k] for k in old if k not in ("input", "previous_response_id"))


def test_string_input_becomes_the_user_message_it_stands_for() -> None:
    recorded = json.dumps({"model": "gpt-5.1", "input": LONG, "stream": False}).encode()
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse())
    forked = json.loads(fork_request(OPENAI_RESPONSES, recorded, answer, QUESTION))
    assert forked["input"] == [
        {"role": "user", "content": LONG},
        *RESPONSES_OUTPUT,
        *responses_tail(),
    ]
    cache = OpenAICache()
    tokens = responses_tokens(json.loads(recorded))
    cache.evaluate("gpt-5.1", tokens, now=0.0)
    assert cache.evaluate("gpt-5.1", responses_tokens(forked), now=1.0) >= len(tokens) - cache.step


# -- eligibility ----------------------------------------------------------------------------

ANTHROPIC_OK = anthropic_body({"system1": EPH})


def with_(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**body, **fields}


CHAT_OK = json.loads(chat_body())
RESPONSES_OK = json.loads(responses_request())


@pytest.mark.parametrize(
    ("adapter", "body", "reason"),
    [
        (ANTHROPIC, [1, 2], "not a JSON object"),
        (ANTHROPIC, with_(ANTHROPIC_OK, tool_choice={"type": "any"}), "forces a tool call"),
        (ANTHROPIC, with_(ANTHROPIC_OK, tool_choice={"type": "tool", "name": "Bash"}), "forces"),
        (ANTHROPIC, with_(ANTHROPIC_OK, messages=[]), "no messages"),
        (
            ANTHROPIC,
            with_(
                ANTHROPIC_OK,
                messages=[*ANTHROPIC_OK["messages"], {"role": "assistant", "content": "{"}],
            ),
            "prefill",
        ),
        (
            ANTHROPIC,
            with_(ANTHROPIC_OK, output_config={"format": {"type": "json_schema", "schema": {}}}),
            "structured output",
        ),
        (ANTHROPIC, anthropic_body({}), "no cache_control"),
        (OPENAI_CHAT, with_(CHAT_OK, tool_choice="required"), "forces a tool call"),
        (
            OPENAI_CHAT,
            with_(CHAT_OK, tool_choice={"type": "function", "function": {"name": "read_file"}}),
            "forces",
        ),
        (
            OPENAI_CHAT,
            with_(
                CHAT_OK,
                tool_choice={
                    "type": "allowed_tools",
                    "allowed_tools": {"mode": "required", "tools": []},
                },
            ),
            "forces",
        ),
        (OPENAI_CHAT, with_(CHAT_OK, n=2), "n > 1"),
        (OPENAI_CHAT, with_(CHAT_OK, response_format={"type": "json_schema"}), "structured"),
        (
            OPENAI_RESPONSES,
            with_(RESPONSES_OK, tool_choice={"type": "custom", "name": "apply_patch"}),
            "forces",
        ),
        (
            OPENAI_RESPONSES,
            with_(RESPONSES_OK, previous_response_id="resp_1", store=False),
            "store: false",
        ),
        (OPENAI_RESPONSES, with_(RESPONSES_OK, conversation="conv_1"), "stored conversation"),
        (OPENAI_RESPONSES, with_(RESPONSES_OK, background=True), "background"),
        (OPENAI_RESPONSES, with_(RESPONSES_OK, input=[]), "no input"),
        (
            OPENAI_RESPONSES,
            with_(RESPONSES_OK, input=[*RESPONSES_OK["input"], FUNCTION_CALL]),
            "prefill",
        ),
    ],
)
def test_request_that_cannot_be_forked_hot_says_why(
    adapter: ProtocolAdapter, body: Any, reason: str
) -> None:
    found = fork_eligibility(adapter, body)
    assert found is not None and reason in found
    with pytest.raises(ForkRefused, match=reason.replace("*", "")):
        fork_request(adapter, json.dumps(body).encode(), text_answer_for(adapter), QUESTION)


def text_answer_for(adapter: ProtocolAdapter) -> AssembledMessage:
    block = Block("text", text="Done.")
    return AssembledMessage(adapter.name, id="resp_x", blocks=[block], complete=True)


@pytest.mark.parametrize(
    ("adapter", "body"),
    [
        (ANTHROPIC, ANTHROPIC_OK),
        (ANTHROPIC, with_(ANTHROPIC_OK, tool_choice={"type": "auto"})),
        (ANTHROPIC, with_(ANTHROPIC_OK, tool_choice={"type": "none"})),
        (OPENAI_CHAT, CHAT_OK),
        (OPENAI_CHAT, with_(CHAT_OK, tool_choice="none")),
        (
            OPENAI_CHAT,
            with_(
                CHAT_OK,
                tool_choice={
                    "type": "allowed_tools",
                    "allowed_tools": {"mode": "auto", "tools": []},
                },
            ),
        ),
        (OPENAI_RESPONSES, RESPONSES_OK),
        (
            OPENAI_RESPONSES,
            with_(RESPONSES_OK, tool_choice={"type": "allowed_tools", "mode": "auto"}),
        ),
        (OPENAI_RESPONSES, with_(RESPONSES_OK, previous_response_id="resp_1")),
        (OPENAI_RESPONSES, with_(RESPONSES_OK, store=False)),
    ],
)
def test_request_that_lets_the_model_answer_in_text_is_eligible(
    adapter: ProtocolAdapter, body: dict[str, Any]
) -> None:
    assert fork_eligibility(adapter, body) is None


def test_every_recorded_main_request_is_eligible() -> None:
    for r in main_requests("claude-code"):
        assert fork_eligibility(ANTHROPIC, r.json()) is None, r.name
    for r in main_requests("codex"):
        assert fork_eligibility(OPENAI_RESPONSES, r.json()) is None, r.name


def test_the_other_clients_main_requests_are_eligible_unless_nothing_is_cached() -> None:
    """OpenCode, Gemini CLI, Qwen Code and aider: every main request can be forked, aider's
    Chat ones ending with its rules as a system message after the ask included; aider on
    Anthropic sends no cache marker, and a fork of it would read nothing from the cache."""
    for client in ("opencode", "gemini-cli", "qwen-code", "aider"):
        for r in main_requests(client):
            adapter = adapter_for_path(r.path)
            assert adapter is not None
            reason = fork_eligibility(adapter, r.json())
            if r.scenario == "anthropic-cache-prompts":
                assert reason is not None and "no cache_control" in reason, r.name
            else:
                assert reason is None, r.name


def test_a_chat_turn_ending_with_a_system_message_is_forked_after_it() -> None:
    body = {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "Act as an expert software developer."},
            {"role": "user", "content": "Where do we deploy?"},
            {"role": "system", "content": "# *SEARCH/REPLACE block* Rules:"},
        ],
    }
    recorded = json.dumps(body).encode()
    answer = AssembledMessage("openai_chat", blocks=[Block("text", text="fly.io")], complete=True)
    forked = json.loads(fork_request(OPENAI_CHAT, recorded, answer, QUESTION))["messages"]
    assert forked[:3] == body["messages"]
    assert forked[3:] == [
        {"role": "assistant", "content": "fly.io"},
        {"role": "user", "content": QUESTION},
    ]
    prefill = {**body, "messages": [*body["messages"][:2], {"role": "assistant", "content": "x"}]}
    assert fork_eligibility(OPENAI_CHAT, prefill) is not None


def test_recorded_body_that_is_not_json_is_refused_not_raised() -> None:
    with pytest.raises(ForkRefused, match="not JSON"):
        fork_request(ANTHROPIC, b"{not json", text_answer(), QUESTION)


def test_empty_question_is_refused() -> None:
    with pytest.raises(ForkRefused, match="question is empty"):
        fork_request(ANTHROPIC, json.dumps(ANTHROPIC_OK).encode(), text_answer(), "  ")


# -- answers that cannot be written back ----------------------------------------------------


def test_stream_cut_inside_the_answer_is_refused() -> None:
    """A cut stream may end inside a thinking block or a tool's input: the provider refuses
    an unsigned thinking block and cannot take half a JSON input."""
    answer = assemble(ANTHROPIC, anthropic_answer_sse(stop=False))
    assert "did not finish" in (answer_refusal(ANTHROPIC, ANTHROPIC_OK, answer) or "")


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (Block("thinking", text="x", signature=None), "no signature"),
        (Block("redacted_thinking"), "no data"),
        (Block("tool_use", id="t1", name="Bash", input='{"comm'), "not a JSON object"),
        (Block("server_tool_use", id="s1"), "not received whole"),
    ],
)
def test_anthropic_block_the_api_would_refuse_is_not_replayed(block: Block, reason: str) -> None:
    answer = AssembledMessage("anthropic", blocks=[block], complete=True)
    assert reason in (answer_refusal(ANTHROPIC, ANTHROPIC_OK, answer) or "")


def test_anthropic_paused_turn_is_not_replayed() -> None:
    answer = AssembledMessage(
        "anthropic",
        blocks=[Block("text", text="Searching")],
        stop_reason="pause_turn",
        complete=True,
    )
    assert "pause_turn" in (answer_refusal(ANTHROPIC, ANTHROPIC_OK, answer) or "")


def test_anthropic_empty_text_block_is_left_out_of_the_replay() -> None:
    """The API refuses an empty text block with a 400; it carries nothing."""
    answer = AssembledMessage(
        "anthropic", blocks=[Block("text", text=""), Block("text", text="Done.")], complete=True
    )
    forked = json.loads(
        fork_request(ANTHROPIC, json.dumps(ANTHROPIC_OK).encode(), answer, QUESTION)
    )
    assert forked["messages"][-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Done."}],
    }


def test_reasoning_without_encrypted_content_is_refused_when_store_is_false() -> None:
    """With ``store: false`` the API cannot look the item up by id: 404."""
    bare = {k: v for k, v in REASONING.items() if k != "encrypted_content"}
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse([bare, FUNCTION_CALL]))
    assert "encrypted_content" in (
        answer_refusal(OPENAI_RESPONSES, with_(RESPONSES_OK, store=False), answer) or ""
    )
    assert answer_refusal(OPENAI_RESPONSES, RESPONSES_OK, answer) is None


def test_responses_call_whose_result_is_not_text_is_refused() -> None:
    computer = {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_c",
        "action": {"type": "screenshot"},
    }
    answer = assemble(OPENAI_RESPONSES, responses_answer_sse([computer]))
    assert "computer_call" in (answer_refusal(OPENAI_RESPONSES, RESPONSES_OK, answer) or "")


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}


def test_failed_answer_is_refused() -> None:
    answer = assemble(
        ANTHROPIC,
        anthropic_answer_sse(stop=False) + sse([("error", OVERLOADED)]),
    )
    assert "overloaded_error" in (answer_refusal(ANTHROPIC, ANTHROPIC_OK, answer) or "")


def test_chat_answer_with_nothing_to_replay_is_refused() -> None:
    answer = AssembledMessage("openai_chat", blocks=[], complete=True)
    assert answer_refusal(OPENAI_CHAT, CHAT_OK, answer) is not None


# -- what the assemblers keep for a replay --------------------------------------------------


def test_responses_assembler_keeps_every_item_whole_and_custom_calls_as_tool_calls() -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "x"},
    }
    answer = assemble(
        OPENAI_RESPONSES, responses_answer_sse([REASONING, search, MESSAGE, CUSTOM_CALL])
    )
    assert [b.raw for b in answer.blocks] == [REASONING, search, MESSAGE, CUSTOM_CALL]
    assert [b.name for b in answer.tool_calls] == ["apply_patch"]


def test_anthropic_assembler_keeps_streamed_citations_and_server_tool_input() -> None:
    citation = {
        "type": "web_search_result_location",
        "url": "https://example.org",
        "cited_text": "x",
    }
    events = anthropic_answer_sse(stop=False).split(b"event: content_block_start")[0]
    extra = sse(
        [
            block_start(
                0,
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            ),
            block_delta(0, {"type": "input_json_delta", "partial_json": '{"query": "caf\u00e9"}'}),
            block_stop(0),
            block_start(1, {"type": "text", "text": "", "citations": None}),
            block_delta(1, {"type": "citations_delta", "citation": citation}),
            block_delta(1, {"type": "text_delta", "text": "It is."}),
            block_stop(1),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 5},
                },
            ),
        ]
    )
    answer = assemble(ANTHROPIC, events + extra)
    forked = json.loads(
        fork_request(ANTHROPIC, json.dumps(ANTHROPIC_OK).encode(), answer, QUESTION)
    )
    server, text = forked["messages"][-2]["content"]
    assert server == {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "caf\u00e9"},
    }
    assert text == {"type": "text", "text": "It is.", "citations": [citation]}
    assert forked["messages"][-1]["content"] == [
        {"type": "text", "text": QUESTION}
    ]  # not a client call


def test_answer_with_a_lone_surrogate_forks_instead_of_crashing() -> None:
    answer = AssembledMessage(
        "anthropic", blocks=[Block("text", text="half \ud83d emoji")], complete=True
    )
    forked = fork_request(ANTHROPIC, json.dumps(ANTHROPIC_OK).encode(), answer, QUESTION)
    assert json.loads(forked)["messages"][-2]["content"][0]["text"] == "half \ud83d emoji"
