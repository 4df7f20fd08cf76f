"""The official SDKs, unchanged, against the emulator over real HTTP."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember.testing import Emulator, Reply, ToolCall, count_tokens
from ember.testing.replies import DEFAULT_SENTENCE

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-5"
LONG = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
HI: Any = [{"role": "user", "content": "Hello there"}]
CUT_ERRORS = (anthropic.APIConnectionError, openai.APIConnectionError, httpx2.TransportError)


def filler(tag: str, n: int) -> str:
    return " ".join([tag] + ["word"] * (n - 1))


# -- Anthropic ------------------------------------------------------------------------------


class TestAnthropicMessages:
    def test_default_reply_is_deterministic(self, claude: anthropic.Anthropic) -> None:
        first = claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
        second = claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
        assert first.content[0].type == "text"
        assert first.content[0].text == f"Noted: Hello there. {DEFAULT_SENTENCE}"
        assert second.content == first.content
        assert first.id != second.id and first.id.startswith("msg_emu_")
        assert first.stop_reason == "end_turn" and first.stop_sequence is None
        assert first.usage.input_tokens == count_tokens("Hello there")
        assert first.usage.output_tokens == count_tokens(first.content[0].text)

    def test_tool_use_after_text(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply(text="Let me look.", tool_calls=[ToolCall("read", {"path": "a"})]))
        message = claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
        assert [b.type for b in message.content] == ["text", "tool_use"]
        call = message.content[1]
        assert call.type == "tool_use" and call.name == "read" and call.input == {"path": "a"}
        assert message.stop_reason == "tool_use"

    def test_stream_helper(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply(text=LONG, tool_calls=[("grep", {"pattern": "x" * 60})]))
        with claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        assert len(pieces) > 3 and "".join(pieces) == LONG
        assert final.content[1].type == "tool_use"
        assert final.content[1].input == {"pattern": "x" * 60}
        assert final.stop_reason == "tool_use"
        assert (
            final.usage.output_tokens
            == Reply(LONG, [("grep", {"pattern": "x" * 60})]).output_tokens()
        )

    def test_raw_stream_event_sequence(self, claude: anthropic.Anthropic) -> None:
        events = list(claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI, stream=True))
        kinds = [e.type for e in events]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
        start = events[0]
        assert start.type == "message_start" and start.message.usage.cache_creation is not None

    async def test_async_create_and_stream(self, url: str, emulator: Emulator) -> None:
        emulator.script(Reply("async hello"), Reply(LONG))
        async with anthropic.AsyncAnthropic(base_url=url, api_key="test", max_retries=0) as client:
            message = await client.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
            assert message.content[0].type == "text" and message.content[0].text == "async hello"
            async with client.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream:
                text = "".join([piece async for piece in stream.text_stream])
        assert text == LONG

    def test_thinking_round_trip(self, claude: anthropic.Anthropic) -> None:
        thinking: Any = {"type": "enabled", "budget_tokens": 1024}
        tools: Any = [{"name": "read", "input_schema": {"type": "object"}}]
        first = claude.messages.create(
            model=CLAUDE, max_tokens=2048, messages=HI, thinking=thinking, tools=tools
        )
        assert first.content[0].type == "thinking" and first.content[0].signature
        history: Any = [*HI, {"role": "assistant", "content": first.content}]
        history.append({"role": "user", "content": "and then?"})
        again = claude.messages.create(
            model=CLAUDE, max_tokens=2048, messages=history, thinking=thinking, tools=tools
        )
        assert again.content[0].type == "thinking"
        tampered: list[Any] = [b.to_dict() for b in first.content]
        tampered[0]["thinking"] += " (edited)"
        history[1] = {"role": "assistant", "content": tampered}
        with pytest.raises(anthropic.BadRequestError, match="cannot be modified"):
            claude.messages.create(
                model=CLAUDE, max_tokens=2048, messages=history, thinking=thinking, tools=tools
            )

    def test_scripted_thinking_streams_with_signature(
        self, claude: anthropic.Anthropic, emulator: Emulator
    ) -> None:
        emulator.script(Reply("done", thinking="Let me think about it carefully."))
        with claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream:
            final = stream.get_final_message()
        block = final.content[0]
        assert block.type == "thinking" and block.thinking == "Let me think about it carefully."
        assert block.signature.startswith("EmuSig")

    def test_count_tokens(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply.error(500, "must not be consumed"))
        counted = claude.messages.count_tokens(model=CLAUDE, messages=HI, system="Be brief.")
        assert counted.input_tokens == count_tokens("Be brief.") + count_tokens("Hello there")
        assert emulator.pending_replies == 1


class TestAnthropicCaching:
    def test_write_then_read(self, claude: anthropic.Anthropic) -> None:
        system: Any = [
            {"type": "text", "text": filler("sys", 1500), "cache_control": {"type": "ephemeral"}}
        ]
        first = claude.messages.create(model=CLAUDE, max_tokens=64, system=system, messages=HI)
        second = claude.messages.create(model=CLAUDE, max_tokens=64, system=system, messages=HI)
        assert first.usage.cache_creation_input_tokens == 1500
        assert first.usage.cache_creation is not None
        assert first.usage.cache_creation.ephemeral_5m_input_tokens == 1500
        assert second.usage.cache_read_input_tokens == 1500
        assert second.usage.input_tokens == count_tokens("Hello there")

    def test_streamed_usage_and_clock(
        self, claude: anthropic.Anthropic, emulator: Emulator
    ) -> None:
        system: Any = [
            {"type": "text", "text": filler("sys", 1500), "cache_control": {"type": "ephemeral"}}
        ]

        def usage() -> Any:
            with claude.messages.stream(
                model=CLAUDE, max_tokens=64, system=system, messages=HI
            ) as stream:
                return stream.get_final_message().usage

        assert usage().cache_creation_input_tokens == 1500
        assert usage().cache_read_input_tokens == 1500
        emulator.advance(301)
        assert usage().cache_creation_input_tokens == 1500

    def test_organisations_are_separate(self, url: str) -> None:
        system: Any = [
            {"type": "text", "text": filler("sys", 1500), "cache_control": {"type": "ephemeral"}}
        ]
        for key, read in (("org-a", 0), ("org-b", 0), ("org-a", 1500)):
            with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as client:
                usage = client.messages.create(
                    model=CLAUDE, max_tokens=64, system=system, messages=HI
                ).usage
            assert usage.cache_read_input_tokens == read

    def test_too_many_breakpoints_is_a_400(self, claude: anthropic.Anthropic) -> None:
        blocks: Any = [
            {"type": "text", "text": f"b{i}", "cache_control": {"type": "ephemeral"}}
            for i in range(5)
        ]
        with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks") as info:
            claude.messages.create(
                model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": blocks}]
            )
        assert info.value.status_code == 400
        assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


class TestAnthropicFaults:
    def test_error_reply(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply.error(429, "slow down", headers={"retry-after": "7"}))
        with pytest.raises(anthropic.RateLimitError) as info:
            claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
        assert info.value.status_code == 429
        assert info.value.response.headers["retry-after"] == "7"
        assert info.value.body == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow down"},
        }

    def test_overloaded(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply.error(529, "Overloaded"))
        with pytest.raises(anthropic.APIStatusError) as info:
            claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
        assert info.value.status_code == 529
        assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]

    def test_cut_stream_raises(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply(LONG, cut_after=4))
        received: list[str] = []
        with (
            pytest.raises(CUT_ERRORS),
            claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream,
        ):
            received.extend(stream.text_stream)
        assert received and "".join(received) != LONG

    def test_cut_json_raises(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply(LONG, cut_after=0))
        with pytest.raises(anthropic.APIConnectionError):
            claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)

    def test_header_delay_lets_timeout_fire(
        self, claude: anthropic.Anthropic, emulator: Emulator
    ) -> None:
        emulator.script(Reply("late", delay_headers=0.5))
        with pytest.raises(anthropic.APITimeoutError):
            claude.with_options(timeout=0.1).messages.create(
                model=CLAUDE, max_tokens=64, messages=HI
            )

    def test_abandoned_request_commits_nothing(
        self, claude: anthropic.Anthropic, emulator: Emulator
    ) -> None:
        system: Any = [
            {"type": "text", "text": filler("sys", 1500), "cache_control": {"type": "ephemeral"}}
        ]
        emulator.script(Reply("late", delay_headers=0.3))
        with pytest.raises(anthropic.APITimeoutError):
            claude.with_options(timeout=0.1).messages.create(
                model=CLAUDE, max_tokens=64, system=system, messages=HI
            )
        time.sleep(0.4)
        usage = claude.messages.create(
            model=CLAUDE, max_tokens=64, system=system, messages=HI
        ).usage
        assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == 1500

    def test_slow_stream(self, claude: anthropic.Anthropic, emulator: Emulator) -> None:
        emulator.script(Reply(LONG, delay=0.02))
        started = time.monotonic()
        with claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream:
            text = "".join(stream.text_stream)
        assert text == LONG
        assert time.monotonic() - started >= 0.02 * 8


# -- recording ------------------------------------------------------------------------------


def test_recorded_bytes_are_what_the_sdk_sent(url: str, emulator: Emulator) -> None:
    bodies: list[bytes] = []

    def hook(request: httpx2.Request) -> None:
        bodies.append(request.content)

    hooks = {"request": [hook]}
    with anthropic.Anthropic(
        base_url=url, api_key="key-1", max_retries=0, http_client=httpx2.Client(event_hooks=hooks)
    ) as client:
        client.messages.create(model=CLAUDE, max_tokens=64, messages=HI, metadata={"user_id": "u"})
    with openai.OpenAI(
        base_url=url + "/v1",
        api_key="key-2",
        max_retries=0,
        http_client=httpx2.Client(event_hooks=hooks),
    ) as oc:
        oc.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "hi"}])
    recorded = emulator.requests
    assert [r.body for r in recorded] == bodies
    assert [r.path for r in recorded] == ["/v1/messages", "/v1/chat/completions"]
    assert recorded[0].json()["metadata"] == {"user_id": "u"}
    assert recorded[0].api_key == "key-1" and recorded[1].api_key == "key-2"
    assert recorded[0].header("Anthropic-Version") is not None
    assert all(name == name.lower() for name, _ in recorded[0].headers)


def test_script_is_fifo_across_protocols_then_reply_fn(
    claude: anthropic.Anthropic, gpt: openai.OpenAI, emulator: Emulator
) -> None:
    emulator.script(Reply("first"), Reply("second"))
    seen: list[str] = []

    def reply_fn(body: dict[str, Any], path: str) -> Reply | None:
        seen.append(path)
        return Reply("from hook") if body["model"] == GPT else None

    emulator.reply_fn = reply_fn
    chat: Any = [{"role": "user", "content": "hi"}]
    assert (
        gpt.chat.completions.create(model=GPT, messages=chat).choices[0].message.content == "first"
    )
    message = claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
    assert message.content[0].type == "text" and message.content[0].text == "second"
    assert gpt.responses.create(model=GPT, input="hi").output_text == "from hook"
    message = claude.messages.create(model=CLAUDE, max_tokens=64, messages=HI)
    assert message.content[0].type == "text" and message.content[0].text.startswith("Noted:")
    assert seen == ["/v1/responses", "/v1/messages"]


# -- OpenAI Chat Completions --------------------------------------------------------------------

CHAT: Any = [{"role": "user", "content": "What is in the file?"}]


class TestChat:
    def test_create(self, gpt: openai.OpenAI) -> None:
        completion = gpt.chat.completions.create(model=GPT, messages=CHAT)
        choice = completion.choices[0]
        assert choice.finish_reason == "stop"
        assert choice.message.content == f"Noted: What is in the file?. {DEFAULT_SENTENCE}"
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        assert completion.usage.prompt_tokens_details.cached_tokens == 0

    def test_tool_calls(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply(tool_calls=[("read", {"path": "a"}), ("read", {"path": "b"})]))
        completion = gpt.chat.completions.create(model=GPT, messages=CHAT)
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        calls = choice.message.tool_calls or []
        assert [json.loads(c.function.arguments) for c in calls if c.type == "function"] == [
            {"path": "a"},
            {"path": "b"},
        ]
        assert len({c.id for c in calls}) == 2

    def test_stream_helper_with_usage(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply(text=LONG, tool_calls=[("grep", {"pattern": "y" * 50})]))
        with gpt.chat.completions.stream(
            model=GPT, messages=CHAT, stream_options={"include_usage": True}
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_completion()
        assert "content.done" in kinds and "tool_calls.function.arguments.done" in kinds
        message = final.choices[0].message
        assert message.content == LONG
        calls = message.tool_calls or []
        assert json.loads(calls[0].function.arguments) == {"pattern": "y" * 50}
        assert final.usage is not None and final.usage.prompt_tokens == 7

    def test_raw_stream_without_usage(self, gpt: openai.OpenAI) -> None:
        chunks = list(gpt.chat.completions.create(model=GPT, messages=CHAT, stream=True))
        assert chunks[0].choices[0].delta.role == "assistant"
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert all(c.usage is None for c in chunks)

    async def test_async(self, url: str, emulator: Emulator) -> None:
        emulator.script(Reply("one"), Reply(LONG))
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="t", max_retries=0) as client:
            completion = await client.chat.completions.create(model=GPT, messages=CHAT)
            assert completion.choices[0].message.content == "one"
            stream = await client.chat.completions.create(model=GPT, messages=CHAT, stream=True)
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == LONG

    def test_prompt_caching(self, gpt: openai.OpenAI) -> None:
        messages: Any = [{"role": "system", "content": filler("sys", 1300)}, *CHAT]
        cached = []
        for key in ("a", "a", "b"):
            usage = gpt.chat.completions.create(
                model=GPT, messages=messages, prompt_cache_key=key
            ).usage
            assert usage is not None and usage.prompt_tokens_details is not None
            cached.append(usage.prompt_tokens_details.cached_tokens)
        assert cached == [0, 1280, 0]

    def test_errors_and_cuts(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply.error(429, "Rate limit reached"), Reply(LONG, cut_after=3))
        with pytest.raises(openai.RateLimitError) as info:
            gpt.chat.completions.create(model=GPT, messages=CHAT)
        assert info.value.body == {
            "message": "Rate limit reached",
            "type": "rate_limit_exceeded",
            "param": None,
            "code": None,
        }
        with pytest.raises(CUT_ERRORS):
            for _ in gpt.chat.completions.create(model=GPT, messages=CHAT, stream=True):
                pass


# -- OpenAI Responses -----------------------------------------------------------------------


class TestResponses:
    def test_create_with_instructions(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        response = gpt.responses.create(model=GPT, input="Say hi", instructions="Be brief.")
        assert response.status == "completed"
        assert response.output_text == f"Noted: Say hi. {DEFAULT_SENTENCE}"
        assert response.usage is not None
        # one marker token each for the instructions and the user turn, then the text
        expected = 2 + count_tokens("Be brief.") + count_tokens("Say hi")
        assert response.usage.input_tokens == expected
        assert emulator.last_request.json()["instructions"] == "Be brief."

    def test_function_call_items(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply.tool_use("read", {"path": "a"}))
        items: Any = [{"role": "user", "content": [{"type": "input_text", "text": "read a"}]}]
        response = gpt.responses.create(model=GPT, input=items)
        call = response.output[0]
        assert call.type == "function_call" and call.name == "read"
        assert json.loads(call.arguments) == {"path": "a"}

    def test_namespaced_function_call(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        """Codex runs an MCP tool only when the call names its namespace apart from the tool."""
        call = ToolCall("memory_save", {"facts": []}, namespace="mcp__ember")
        emulator.script(Reply("", [call]), Reply("", [call]))
        plain = gpt.responses.create(model=GPT, input="save")
        with gpt.responses.stream(model=GPT, input="save") as stream:
            done = [e.item for e in stream if e.type == "response.output_item.done"]
        for item in (plain.output[0].model_dump(), done[0].model_dump()):
            assert (item["name"], item.get("namespace")) == ("memory_save", "mcp__ember")

    def test_stream_helper(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply(text=LONG, tool_calls=[("edit", {"file": "z" * 40})]))
        with gpt.responses.stream(model=GPT, input="go") as stream:
            events = list(stream)
            final = stream.get_final_response()
        numbers = [e.sequence_number for e in events]
        assert numbers == list(range(len(events)))
        assert events[0].type == "response.created" and events[-1].type == "response.completed"
        assert final.output_text == LONG
        assert [item.type for item in final.output] == ["message", "function_call"]

    async def test_async_stream(self, url: str, emulator: Emulator) -> None:
        emulator.script(Reply(LONG))
        async with (
            openai.AsyncOpenAI(base_url=url + "/v1", api_key="t", max_retries=0) as client,
            client.responses.stream(model=GPT, input="go") as stream,
        ):
            deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        assert "".join(deltas) == LONG

    def test_prompt_caching(self, gpt: openai.OpenAI) -> None:
        instructions = filler("ins", 1200)
        cached = []
        for _ in range(2):
            usage = gpt.responses.create(model=GPT, instructions=instructions, input="hi").usage
            assert usage is not None
            cached.append(usage.input_tokens_details.cached_tokens)
        assert cached == [0, 1152]

    def test_error_and_cut(self, gpt: openai.OpenAI, emulator: Emulator) -> None:
        emulator.script(Reply.error(500, "boom"), Reply(LONG, cut_after=4))
        with pytest.raises(openai.InternalServerError):
            gpt.responses.create(model=GPT, input="go")
        with pytest.raises(CUT_ERRORS), gpt.responses.stream(model=GPT, input="go") as stream:
            for _ in stream:
                pass
