"""The emulator speaking Gemini, checked with Google's official GenAI SDK over real HTTP."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import errors, types

from ember.testing import Emulator, Reply, ToolCall
from ember.testing.commands import command_replies
from ember.testing.render_gemini import signature_for
from ember.testing.replies import DEFAULT_SENTENCE
from ember.testing.request_log import RequestLog
from ember.testing.shadow import shadow_replies

MODEL = "gemini-2.5-flash"
LONG = "the build uses uv and ruff " * 300  # ~1,800 tokens: past the 1,024 minimum


def client(url: str, key: str = "k1") -> genai.Client:
    return genai.Client(
        api_key=key, http_options=types.HttpOptions(base_url=url, api_version="v1beta")
    )


@pytest.fixture
def gemini(url: str) -> Iterator[genai.Client]:
    yield client(url)


def test_generate_content_answers_in_googles_shape(
    gemini: genai.Client, emulator: Emulator
) -> None:
    r = gemini.models.generate_content(model=MODEL, contents="Hello there")
    assert r.text == f"Noted: Hello there. {DEFAULT_SENTENCE}"
    assert r.model_version == MODEL and r.response_id and r.response_id.startswith("emu-gemini-")
    assert r.candidates and r.candidates[0].finish_reason == types.FinishReason.STOP
    usage = r.usage_metadata
    assert usage is not None and usage.prompt_token_count and usage.candidates_token_count
    assert usage.cached_content_token_count is None  # too short to cache
    [request] = emulator.requests
    assert request.path == f"/v1beta/models/{MODEL}:generateContent"
    assert request.header("x-goog-api-key") == "k1"


def test_a_stream_comes_in_pieces_and_ends_with_the_usage(gemini: genai.Client) -> None:
    chunks = list(gemini.models.generate_content_stream(model=MODEL, contents="Hello there"))
    assert len(chunks) > 2
    assert "".join(c.text or "" for c in chunks) == f"Noted: Hello there. {DEFAULT_SENTENCE}"
    assert chunks[-1].usage_metadata is not None and chunks[-1].candidates
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP


def test_without_alt_sse_a_stream_is_one_json_array(url: str) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    r = httpx2.post(f"{url}/v1beta/models/{MODEL}:streamGenerateContent", json=body)
    chunks = r.json()
    assert r.status_code == 200 and isinstance(chunks, list) and len(chunks) > 1
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_a_repeated_prefix_is_read_from_the_implicit_cache(url: str) -> None:
    config = types.GenerateContentConfig(system_instruction="You are terse.")
    mine, theirs = client(url), client(url, "k2")
    first = mine.models.generate_content(model=MODEL, contents=LONG, config=config)
    again = mine.models.generate_content(
        model=MODEL, contents=[LONG, "and one more thing"], config=config
    )
    other_key = theirs.models.generate_content(model=MODEL, contents=LONG, config=config)
    assert first.usage_metadata and first.usage_metadata.cached_content_token_count is None
    assert again.usage_metadata and again.usage_metadata.prompt_token_count
    cached = again.usage_metadata.cached_content_token_count
    assert cached and 1024 <= cached <= (first.usage_metadata.prompt_token_count or 0)
    # another key never reads this one's entries
    assert other_key.usage_metadata and other_key.usage_metadata.cached_content_token_count is None


def test_a_changed_system_instruction_misses_the_cache(url: str) -> None:
    gemini = client(url)
    gemini.models.generate_content(
        model=MODEL, contents=LONG, config=types.GenerateContentConfig(system_instruction="a")
    )
    r = gemini.models.generate_content(
        model=MODEL, contents=LONG, config=types.GenerateContentConfig(system_instruction="b")
    )
    assert r.usage_metadata and r.usage_metadata.cached_content_token_count is None


def test_function_calls_and_thought_signatures(gemini: genai.Client, emulator: Emulator) -> None:
    emulator.script(Reply("Looking.", [ToolCall("ls", {"path": "."})], thinking="list first"))
    r = gemini.models.generate_content(model=MODEL, contents="what is here?")
    assert r.function_calls and r.function_calls[0].name == "ls"
    assert r.function_calls[0].args == {"path": "."}
    parts = r.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert parts and parts[0].text == "Looking." and not parts[0].thought_signature
    assert parts[1].function_call and parts[1].thought_signature  # on the first call
    assert r.usage_metadata and r.usage_metadata.thoughts_token_count
    raw = json.loads(emulator.requests[-1].body)
    assert raw["contents"][0]["parts"] == [{"text": "what is here?"}]


def test_thoughts_are_shown_when_asked_for(gemini: genai.Client) -> None:
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True)
    )
    r = gemini.models.generate_content(model=MODEL, contents="hi", config=config)
    parts = r.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert parts and parts[0].thought is True and parts[0].text
    assert parts[-1].thought_signature and parts[-1].thought is not True  # on the last part


def test_mode_none_forbids_calls(gemini: genai.Client, emulator: Emulator) -> None:
    emulator.script(Reply.tool_use("ls", {}))
    config = types.GenerateContentConfig(
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.NONE
            )
        )
    )
    r = gemini.models.generate_content(model=MODEL, contents="hi", config=config)
    assert not r.function_calls and r.text


def test_a_part_with_a_field_gemini_does_not_have_is_refused(url: str) -> None:
    body = {"contents": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    r = httpx2.post(f"{url}/v1beta/models/{MODEL}:generateContent", json=body)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and 'Unknown name "type"' in error["message"]


def test_errors_reach_the_sdk_with_their_code_and_status(
    gemini: genai.Client, emulator: Emulator
) -> None:
    emulator.script(Reply.error(429, "quota", "RESOURCE_EXHAUSTED"))
    with pytest.raises(errors.ClientError) as err:
        gemini.models.generate_content(model=MODEL, contents="hi")
    assert err.value.code == 429 and err.value.status == "RESOURCE_EXHAUSTED"
    emulator.script(Reply.failing("UNAVAILABLE", "overloaded", after=2))
    with pytest.raises(errors.APIError) as failed:
        list(gemini.models.generate_content_stream(model=MODEL, contents="hi"))
    assert failed.value.code == 503


def test_count_tokens_counts_without_caching(gemini: genai.Client, emulator: Emulator) -> None:
    counted = gemini.models.count_tokens(model=MODEL, contents=LONG)
    assert counted.total_tokens and counted.total_tokens > 1024
    r = gemini.models.generate_content(model=MODEL, contents=LONG)
    assert r.usage_metadata and r.usage_metadata.cached_content_token_count is None


def test_the_signature_is_base64_the_sdk_decodes() -> None:
    assert base64.b64decode(signature_for("x")).startswith(b"EmuSig")


# -- reply functions and the log speak Gemini too -----------------------------------------------


def _body(*texts: str, tools: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": t}]} for t in texts]}
    if tools is not None:
        body["tools"] = tools
    return body


def test_the_shadow_question_is_answered_on_gemini() -> None:
    question = (
        "[ember shadow turn] Messages not yet read:\n"
        "m:m0123456789ab user: The deploy target is eu-west-1.\n"
    )
    reply = shadow_replies()(_body("hello", question), "/v1beta/models/m:generateContent")
    assert reply is not None and "eu-west-1" in reply.text
    propose = [{"functionDeclarations": [{"name": "memory_propose"}]}]
    called = shadow_replies()(_body(question, tools=propose), "/v1beta/models/m:generateContent")
    assert called is not None and called.tool_calls[0].name == "memory_propose"


def test_a_run_ask_calls_gemini_clis_shell_tool() -> None:
    shell = [
        {
            "functionDeclarations": [
                {
                    "name": "run_shell_command",
                    "parametersJsonSchema": {"properties": {"command": {"type": "string"}}},
                }
            ]
        }
    ]
    reply = command_replies(_body("please run: `ls -la`", tools=shell), "/v1beta/x")
    assert reply is not None and reply.tool_calls[0].name == "run_shell_command"
    assert dict(reply.tool_calls[0].input) == {"command": "ls -la"}
    done = _body("please run: `ls -la`", tools=shell)
    done["contents"].append(
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]}
    )
    after = command_replies(done, "/v1beta/x")
    assert after is not None and not after.tool_calls


def test_the_request_log_names_the_model_and_stream_from_the_path(
    url: str, emulator: Emulator
) -> None:
    stream = io.StringIO()
    emulator.log = RequestLog(stream)
    try:
        httpx2.post(
            f"{url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&key=SECRET-KEY",
            json=_body("hi"),
        )
    finally:
        emulator.log = None
    line = json.loads(stream.getvalue())
    assert (line["model"], line["stream"], line["usage"]["output_tokens"] > 0) == (
        MODEL,
        True,
        True,
    )
    assert "SECRET-KEY" not in stream.getvalue()


def test_gemini_3_refuses_a_function_call_sent_back_without_its_signature(
    gemini: genai.Client, emulator: Emulator
) -> None:
    emulator.script(Reply.tool_use("ls", {}))
    first = gemini.models.generate_content(model="gemini-3-pro-preview", contents="look")
    turn = first.candidates[0].content  # type: ignore[index]
    assert turn and turn.parts and turn.parts[0].thought_signature
    result = types.Part.from_function_response(name="ls", response={"output": "a.py"})
    history: list[Any] = ["look", turn, types.Content(role="user", parts=[result])]
    assert gemini.models.generate_content(model="gemini-3-pro-preview", contents=history).text
    unsigned = types.Content(
        role="model", parts=[types.Part(function_call=turn.parts[0].function_call)]
    )
    with pytest.raises(errors.ClientError, match="thought_signature"):
        gemini.models.generate_content(
            model="gemini-3-pro-preview", contents=["look", unsigned, history[2]]
        )
