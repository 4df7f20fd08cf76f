"""Compression over Gemini, with Google's GenAI SDK as the client: a ``functionResponse``
output is shortened the first time and replayed after, and a streamed answer that retrieves
(ember runs ``ember_retrieve`` itself) stays one answer the client can read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google import genai
from google.genai import types

from ember.testing.replies import Reply
from ember.testing.tool_outputs import pytest_log
from tests.conftest import Stack, StackFactory

#: A Gemini 3 model: the emulator then refuses a function call sent back without its thought
#: signature, so the hidden round proves ember replays the model's parts as they were given.
MODEL = "gemini-3-pro-preview"
HEADERS = {"x-ember-project-id": "shop", "x-ember-session-id": "gemini-compress-1"}
SHELL = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="run_shell_command",
            description="Runs a shell command.",
            parameters_json_schema={
                "type": "object",
                "properties": {"command": {"type": "string"}},
            },
        )
    ]
)
CONFIG = types.GenerateContentConfig(tools=[SHELL])


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    return make_stack(stages="features", shadow="off", memory_mode="off")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def test_a_function_response_is_shortened_replayed_and_retrievable_in_a_stream(
    stack: Stack,
) -> None:
    log = pytest_log()
    options = types.HttpOptions(base_url=stack.url, api_version="v1beta", headers=HEADERS)
    gemini = genai.Client(api_key="k", http_options=options)
    history: list[Any] = [user("Run the tests.")]
    stack.emulator.script(Reply.tool_use("run_shell_command", {"command": "pytest -v"}))
    first = gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    assert first.function_calls and first.function_calls[0].name == "run_shell_command"
    response = {"output": log.text}
    history += [
        first.candidates[0].content,  # type: ignore[index]
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "run_shell_command", "response": response}}],
        },
    ]
    stack.emulator.script(Reply("One test fails."))
    gemini.models.generate_content(model=MODEL, contents=history, config=CONFIG)
    sent = json.loads(stack.emulator.requests[-1].body)
    output = sent["contents"][-1]["parts"][0]["functionResponse"]["response"]["output"]
    assert len(output) < len(log.text) / 5 and all(k in output for k in log.must_keep)
    assert sent["tools"][-1]["functionDeclarations"][0]["name"] == "ember_retrieve"
    ref = output.split("ember_retrieve ref=")[1].split()[0]
    stack.settle()  # the original on disk, as it is by the time a model asks for it
    history += [
        {"role": "model", "parts": [{"text": "One test fails."}]},
        user("Show the first lines of the log."),
    ]
    stack.emulator.script(
        Reply.tool_use("ember_retrieve", {"ref": ref, "lines": "1-3"}, text="Looking."),
        Reply("Here they are."),
    )
    chunks = list(
        gemini.models.generate_content_stream(model=MODEL, contents=history, config=CONFIG)
    )
    assert "".join(c.text or "" for c in chunks) == "Looking.Here they are."
    assert not any(c.function_calls for c in chunks)
    assert chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == "STOP"
    hidden = json.loads(stack.emulator.requests[-1].body)["contents"]
    retrieved = hidden[-1]["parts"][0]["functionResponse"]
    assert retrieved["name"] == "ember_retrieve"
    assert retrieved["response"]["output"] == "\n".join(log.text.split("\n")[:3])
    replayed = hidden[2]["parts"][0]["functionResponse"]["response"]["output"]
    assert replayed == output  # the same shortening, byte for byte, in later requests
    own_call = hidden[-2]["parts"][-1]
    assert own_call["functionCall"]["name"] == "ember_retrieve" and own_call["thoughtSignature"]
