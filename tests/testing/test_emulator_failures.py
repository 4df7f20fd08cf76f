"""The emulator's failures after a 200, as the official SDKs see them: an error event inside
each protocol's stream, a stream that ends cleanly before its final event, a 200 error body."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from ember.testing import Emulator, Reply

CLAUDE = "claude-sonnet-4-5"
HI: Any = [{"role": "user", "content": "Hello there"}]
LONG = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"


def test_anthropic_error_event_after_some_text(
    claude: anthropic.Anthropic, emulator: Emulator
) -> None:
    emulator.script(Reply.failing("overloaded_error", "Overloaded", after=5, text=LONG))
    received: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError) as err,
        claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream,
    ):
        received.extend(stream.text_stream)
    assert received and "".join(received) != LONG
    assert err.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_chat_error_chunk_after_some_text(gpt: openai.OpenAI, emulator: Emulator) -> None:
    emulator.script(Reply.failing("server_error", "The server had an error", after=3, text=LONG))
    received: list[str] = []
    with pytest.raises(openai.APIError) as err:
        for chunk in gpt.chat.completions.create(model="gpt-5", messages=HI, stream=True):
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) and err.value.message == "The server had an error"


def test_responses_failed_event_after_some_events(gpt: openai.OpenAI, emulator: Emulator) -> None:
    emulator.script(Reply.failing("server_error", "boom", after=4, text=LONG))
    events = list(gpt.responses.create(model="gpt-5", input="hi", stream=True))
    assert [e.sequence_number for e in events] == list(range(5))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.status == "failed" and last.response.id == events[0].response.id  # type: ignore[union-attr]
    assert last.response.error is not None and last.response.error.message == "boom"


def test_anthropic_stream_closed_cleanly_before_message_stop(
    claude: anthropic.Anthropic, emulator: Emulator
) -> None:
    emulator.script(Reply(LONG, close_after=4))
    with claude.messages.stream(model=CLAUDE, max_tokens=64, messages=HI) as stream:
        types = [event.type for event in stream]  # ends without an error
    # message_start, ping (hidden by the SDK), content_block_start, one delta: then the end
    assert types.count("content_block_delta") == 1
    assert "message_delta" not in types and "message_stop" not in types


def test_chat_stream_closed_cleanly_before_done(url: str, emulator: Emulator) -> None:
    emulator.script(Reply(LONG, close_after=2))
    body = {"model": "gpt-5", "messages": HI, "stream": True}
    with httpx2.stream("POST", url + "/v1/chat/completions", json=body) as r:
        lines = [line for line in r.iter_lines() if line]
    assert len(lines) == 2 and all(json.loads(line[6:])["choices"] for line in lines)
    assert "[DONE]" not in "".join(lines)


def test_responses_stream_closed_cleanly_before_completed(
    gpt: openai.OpenAI, emulator: Emulator
) -> None:
    emulator.script(Reply(LONG, close_after=3))
    events = list(gpt.responses.create(model="gpt-5", input="hi", stream=True))
    assert [e.type for e in events][-1] != "response.completed" and len(events) == 3


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/messages", {"model": CLAUDE, "max_tokens": 9, "messages": HI}, "error"),
        ("/v1/chat/completions", {"model": "gpt-5", "messages": HI}, "error"),
        ("/v1/responses", {"model": "gpt-5", "input": "hi"}, "failed"),
    ],
)
def test_a_failing_json_answer_is_a_200_error_body(
    url: str, emulator: Emulator, path: str, body: dict[str, Any], expected: str
) -> None:
    emulator.script(Reply.failing("server_error", "it failed"))
    r = httpx2.post(url + path, json=body, headers={"x-api-key": "k"})
    assert r.status_code == 200
    got = r.json()
    if expected == "failed":
        assert got["status"] == "failed" and got["error"]["message"] == "it failed"
    else:
        assert got["error"]["message"] == "it failed"
