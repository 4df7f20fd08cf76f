"""Compression end to end: the official SDK through the real proxy, against the emulator.

A Claude-Code-shaped loop: the model calls a tool, the client sends its long output, ember
shortens it the first time it goes out, replays the same bytes on every later request (the
prompt cache keeps reading it), and runs ``ember_retrieve`` itself when the model asks for what
was left out — streamed, the client never sees that call.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import anthropic
import pytest

from ember.testing.agent import TOOLS, system_prompt
from ember.testing.replies import Reply
from ember.testing.tool_outputs import build_log, pytest_log, source_file
from tests.conftest import Stack, StackFactory

CWD = "/home/dev/shop"
HEADERS = {"x-ember-session-id": "compress-session-1"}


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    return make_stack(stages="features", shadow="off", memory_mode="off")


@pytest.fixture(autouse=True)
def _closed_clients() -> Any:
    yield
    for loop in Loop.opened:
        loop.client.close()
    Loop.opened.clear()


class Loop:
    """The client side of an agent: it keeps the history and sends it whole every turn."""

    opened: ClassVar[list[Loop]] = []

    def __init__(self, stack: Stack) -> None:
        Loop.opened.append(self)
        self.stack = stack
        self.history: list[dict[str, Any]] = []
        self.client = anthropic.Anthropic(
            base_url=stack.url, api_key="sk-test", max_retries=0, default_headers=HEADERS
        )

    def send(self, content: list[dict[str, Any]] | str, stream: bool = True) -> Any:
        self.history.append({"role": "user", "content": content})
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": system_prompt(CWD),
            "tools": TOOLS,
            "messages": self.history,
        }
        if stream:
            with self.client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        else:
            msg = self.client.messages.create(**kwargs)
        self.history.append({"role": "assistant", "content": [b.model_dump() for b in msg.content]})
        return msg

    def result(self, msg: Any, text: str) -> list[dict[str, Any]]:
        [call] = [b for b in msg.content if b.type == "tool_use"]
        return [{"type": "tool_result", "tool_use_id": call.id, "content": text}]


def upstream_body(stack: Stack, n: int = -1) -> dict[str, Any]:
    return json.loads(stack.emulator.requests[n].body)


def sent_outputs(body: dict[str, Any]) -> list[str]:
    return [
        b["content"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_a_long_log_is_shortened_once_and_replayed_byte_for_byte(stack: Stack) -> None:
    log = pytest_log()
    loop = Loop(stack)
    stack.emulator.script(
        Reply.tool_use("Bash", {"command": "pytest -v"}),
        Reply("The refund test fails."),
        Reply("Ok."),
    )
    first = loop.send("Run the tests and tell me why the refund test fails.")
    assert [b.type for b in first.content] == ["tool_use"]
    loop.send(loop.result(first, log.text))
    [short] = sent_outputs(upstream_body(stack))
    assert len(short) < len(log.text) / 5
    assert all(line in short for line in log.must_keep)  # the failure survives byte for byte
    assert "ember_retrieve ref=" in short
    # The tool is offered from the first request on, in the same bytes.
    tools = [[t["name"] for t in upstream_body(stack, i)["tools"]] for i in range(2)]
    assert tools[0] == tools[1] and tools[0][-1] == "ember_retrieve"
    loop.send("Thanks, and the build?")
    [again] = sent_outputs(upstream_body(stack))
    assert again == short  # replayed: the provider reads it from its cache
    # The client never saw the shortening: its history holds the original.
    assert loop.history[2]["content"][0]["content"] == log.text


def test_exact_outputs_and_small_ones_are_left_as_they_were(stack: Stack) -> None:
    loop = Loop(stack)
    source = source_file()
    stack.emulator.script(
        Reply.tool_use("Read", {"path": "src/shop/billing/refund.py"}), Reply("Read it.")
    )
    first = loop.send("Read the refund module.")
    loop.send(loop.result(first, source.text))
    assert sent_outputs(upstream_body(stack)) == [source.text]
    stack.emulator.script(Reply.tool_use("Bash", {"command": "ls"}), Reply("Done."))
    second = loop.send("And list the directory.")
    loop.send(loop.result(second, "a.py\nb.py\n"))
    assert sent_outputs(upstream_body(stack))[-1] == "a.py\nb.py\n"


def test_the_model_retrieves_what_was_left_out_and_the_client_never_sees_the_call(
    stack: Stack,
) -> None:
    build = build_log()
    loop = Loop(stack)
    stack.emulator.script(Reply.tool_use("Bash", {"command": "cargo build --release"}))
    first = loop.send("Build it and check the warnings.")
    stack.emulator.script(Reply("Three warnings."))
    loop.send(loop.result(first, build.text))
    [short] = sent_outputs(upstream_body(stack))
    ref = short.split("ember_retrieve ref=")[1].split()[0]
    before = len(stack.emulator.requests)
    stack.emulator.script(
        Reply.tool_use("ember_retrieve", {"ref": ref, "lines": "100-102"}, text="Let me look."),
        Reply("Lines 100-102 are plain compile steps."),
    )
    answer = loop.send("What is on lines 100 to 102 of the build log?")
    texts = [b.text for b in answer.content if b.type == "text"]
    assert texts == ["Let me look.", "Lines 100-102 are plain compile steps."]
    assert all(b.type == "text" for b in answer.content)  # the owned call never reached it
    assert len(stack.emulator.requests) == before + 2  # one hidden round
    hidden = upstream_body(stack)
    result = hidden["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"] == "\n".join(build.text.split("\n")[99:102])


def test_a_ref_of_nothing_gets_a_tool_error_not_another_output(stack: Stack) -> None:
    build = build_log()
    loop = Loop(stack)
    stack.emulator.script(Reply.tool_use("Bash", {"command": "cargo build --release"}))
    first = loop.send("Build it.")
    stack.emulator.script(Reply("Built."))
    loop.send(loop.result(first, build.text))
    stack.emulator.script(
        Reply.tool_use("ember_retrieve", {"ref": "c0000000000"}), Reply("It is gone.")
    )
    loop.send("Show me the whole build log.", stream=False)
    result = upstream_body(stack)["messages"][-1]["content"][0]
    assert result["is_error"] is True and "no output with ref c0000000000" in result["content"]


def test_compression_is_off_by_header(stack: Stack) -> None:
    log = pytest_log()
    loop = Loop(stack)
    loop.client = loop.client.with_options(default_headers={**HEADERS, "x-ember-compress": "off"})
    stack.emulator.script(Reply.tool_use("Bash", {"command": "pytest -v"}), Reply("Fails."))
    first = loop.send("Run the tests.")
    loop.send(loop.result(first, log.text))
    assert sent_outputs(upstream_body(stack)) == [log.text]
    assert all(k.lower() != "x-ember-compress" for k, _ in stack.emulator.requests[-1].headers)


def test_ember_doctor_says_what_originals_are_kept(stack: Stack) -> None:
    from click.testing import CliRunner

    from ember.cli import cli

    log = pytest_log()
    loop = Loop(stack)
    stack.emulator.script(Reply.tool_use("Bash", {"command": "pytest -v"}), Reply("Fails."))
    first = loop.send("Run the tests.")
    loop.send(loop.result(first, log.text))
    stack.settle()
    env = {"EMBER_HOME": str(stack.home)}
    out = CliRunner().invoke(cli, ["doctor", "--json"], env=env)
    details = [f["detail"] for f in json.loads(out.stdout)["findings"]]
    [line] = [d for d in details if d.startswith("compression:")]
    assert "1 original(s) kept for ember_retrieve" in line
    assert "kept 30 days, at most 200 MB" in line


def test_the_model_may_retrieve_at_once_in_the_exchange_that_shortened_the_output(
    stack: Stack,
) -> None:
    """The original's row is only queued when the shortened output goes out; a retrieval in
    the answer to that very request must still find it."""
    build = build_log()
    asked: list[str] = []

    def model(body: dict[str, Any], path: str) -> Reply | None:
        last = body["messages"][-1]["content"]
        if not isinstance(last, list) or last[0].get("type") != "tool_result":
            return None
        text = str(last[0]["content"])
        if "ember_retrieve ref=" in text and not asked:
            asked.append(text.split("ember_retrieve ref=")[1].split()[0])
            return Reply.tool_use("ember_retrieve", {"ref": asked[0], "lines": "1-2"})
        return Reply("Done.")

    loop = Loop(stack)
    stack.emulator.script(Reply.tool_use("Bash", {"command": "cargo build --release"}))
    first = loop.send("Build it.")
    stack.emulator.reply_fn = model
    answer = loop.send(loop.result(first, build.text))
    assert [b.text for b in answer.content if b.type == "text"] == ["Done."]
    result = upstream_body(stack)["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert result["content"] == "\n".join(build.text.split("\n")[:2])
