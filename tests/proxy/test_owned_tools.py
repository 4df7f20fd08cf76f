"""Tools ember offers the model and executes itself: the client never sees their calls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anthropic
import openai
import pytest

from ember.exchange import Exchange, Stage
from ember.protocols.tooling import TOOLING, ToolSpec
from ember.proxy.owned import MAX_ROUNDS
from ember.store.accounting import exchanges, session_totals
from ember.testing import Reply
from tests.conftest import Stack, StackFactory

LOOKUP = ToolSpec(
    "ember_lookup",
    "Look a key up in ember's notes.",
    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)


class Notes:
    """A stand-in tool set: the memory tools use the same mechanism."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return [LOOKUP]

    async def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        self.calls.append((name, arguments))
        if arguments.get("key") == "boom":
            raise RuntimeError("tool exploded")
        return f"value of {arguments['key']} is 42", False


class OfferNotes(Stage):
    name = "notes"

    def __init__(self, notes: Notes) -> None:
        self.notes = notes

    async def on_request(self, ex: Exchange) -> None:
        TOOLING[ex.adapter.name].add_definitions(ex.doc, self.notes.specs)
        ex.owned_tools = self.notes


@pytest.fixture
def notes() -> Notes:
    return Notes()


@pytest.fixture
def owned(make_stack: StackFactory, notes: Notes) -> Stack:
    return make_stack(stages=[OfferNotes(notes)])


MSG: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 256,
    "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "what is x?"}],
}


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_client_sees_only_the_final_answer(
    owned: Stack, notes: Notes, stream: bool
) -> None:
    owned.emulator.script(
        Reply.tool_use("ember_lookup", {"key": "x"}, text="Checking."), Reply("x is 42.")
    )
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        if stream:
            with c.messages.stream(**MSG) as s:
                final = s.get_final_message()
        else:
            final = c.messages.create(**MSG)
    # A streamed answer streams: the text before the owned call, then the continuation's
    # (spliced in as more of one answer); a JSON one is the final round's alone.
    assert [b.type for b in final.content] == (["text", "text"] if stream else ["text"])
    assert final.content[-1].text == "x is 42."  # type: ignore[union-attr]
    if stream:
        assert final.content[0].text == "Checking."  # type: ignore[union-attr]
    assert notes.calls == [("ember_lookup", {"key": "x"})]
    first, second = (r.json() for r in owned.emulator.requests)
    assert [t["name"] for t in first["tools"]] == ["Bash", "ember_lookup"]
    assert second["messages"][-2]["content"][-1]["name"] == "ember_lookup"
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "value of x is 42"
    assert second["messages"][:1] == first["messages"]


def test_hidden_rounds_are_billed(owned: Stack) -> None:
    owned.emulator.script(Reply.tool_use("ember_lookup", {"key": "x"}), Reply("done"))
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        final = c.messages.create(**MSG)
    owned.settle()
    row, hidden = exchanges(owned.home / "stats.db")
    # The client saw one answer; the provider billed two: the hidden round has its own row,
    # with its origin, and stays out of the session's own totals.
    assert row["origin"] == "client" and row["output_tokens"] == final.usage.output_tokens
    assert hidden["origin"] == "owned_tools" and hidden["output_tokens"] > 0
    [total] = session_totals(owned.home / "stats.db")
    assert total["requests"] == 1


def test_mixed_turn_runs_ember_tools_and_asks_again_for_the_clients(
    owned: Stack, notes: Notes
) -> None:
    owned.emulator.script(
        Reply("", [("ember_lookup", {"key": "x"}), ("Bash", {"command": "ls"})]),
        Reply.tool_use("Bash", {"command": "ls"}),
    )
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        final = c.messages.create(**MSG)
    assert [(b.type, getattr(b, "name", None)) for b in final.content] == [("tool_use", "Bash")]
    second = owned.emulator.requests[1].json()
    replayed = second["messages"][-2]["content"]
    assert [b.get("name") for b in replayed if b["type"] == "tool_use"] == ["ember_lookup"]


def test_a_model_that_keeps_calling_is_stopped(owned: Stack, notes: Notes) -> None:
    owned.emulator.script(
        *[Reply.tool_use("ember_lookup", {"key": str(i)}) for i in range(MAX_ROUNDS + 1)]
    )
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        final = c.messages.create(**MSG)
    assert all(b.type == "text" for b in final.content)
    last = owned.emulator.requests[-1].json()
    assert last["tool_choice"] == {"type": "none"}
    assert len(owned.emulator.requests) == MAX_ROUNDS + 1


def test_a_failing_tool_becomes_an_error_result_not_a_failed_request(owned: Stack) -> None:
    owned.emulator.script(Reply.tool_use("ember_lookup", {"key": "boom"}), Reply("sorry"))
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        assert c.messages.create(**MSG).content[0].text == "sorry"  # type: ignore[union-attr]
    result = owned.emulator.requests[1].json()["messages"][-1]["content"][0]
    assert result["is_error"] is True and "tool exploded" in result["content"]


def test_upstream_error_in_a_hidden_round_reaches_the_client(owned: Stack) -> None:
    owned.emulator.script(
        Reply.tool_use("ember_lookup", {"key": "x"}), Reply.error(529, "overloaded")
    )
    with (
        anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c,
        pytest.raises(anthropic.APIStatusError) as err,
    ):
        c.messages.create(**MSG)
    assert err.value.status_code == 529


def test_an_owned_call_in_a_stream_that_failed_is_not_run(owned: Stack, notes: Notes) -> None:
    """The model's turn ended in an error: acting on its calls, and asking again on top of
    them, would hide the failure and build on an answer the provider disowned."""
    failing = Reply.tool_use(
        "ember_lookup", {"key": "x"}, error_after=6, error_type="overloaded_error"
    )
    owned.emulator.script(failing, Reply("never asked for"))
    with (
        anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c,
        pytest.raises(anthropic.APIStatusError) as err,
        c.messages.stream(**MSG) as s,
    ):
        s.until_done()
    assert err.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert notes.calls == [] and len(owned.emulator.requests) == 1
    owned.settle()
    [row] = exchanges(owned.home / "stats.db")
    # the status the client saw; the provider's error in its own column
    assert (row["outcome"], row["status"]) == ("stream_error", 200)
    assert row["error_type"] == "overloaded_error"


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions(owned: Stack, notes: Notes, stream: bool) -> None:
    owned.emulator.script(Reply.tool_use("ember_lookup", {"key": "y"}), Reply("y is 42."))
    with openai.OpenAI(base_url=owned.url + "/v1", api_key="k", max_retries=0) as c:
        kwargs: dict[str, Any] = {"model": "gpt-5", "messages": [{"role": "user", "content": "y?"}]}
        if stream:
            with c.chat.completions.stream(**kwargs) as s:
                text = s.get_final_completion().choices[0].message.content
        else:
            msg = c.chat.completions.create(**kwargs).choices[0].message
            assert not msg.tool_calls
            text = msg.content
    assert text == "y is 42."
    second = owned.emulator.requests[1].json()
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
        "content": "value of y is 42",
    }


@pytest.mark.parametrize("stream", [False, True])
def test_responses(owned: Stack, notes: Notes, stream: bool) -> None:
    owned.emulator.script(Reply.tool_use("ember_lookup", {"key": "z"}), Reply("z is 42."))
    with openai.OpenAI(base_url=owned.url + "/v1", api_key="k", max_retries=0) as c:
        if stream:
            with c.responses.stream(model="gpt-5", input="z?") as s:
                resp = s.get_final_response()
        else:
            resp = c.responses.create(model="gpt-5", input="z?")
    assert resp.output_text == "z is 42."
    assert all(item.type != "function_call" for item in resp.output)
    second = owned.emulator.requests[1].json()
    assert second["input"][0] == {"role": "user", "content": [{"type": "input_text", "text": "z?"}]}
    assert second["input"][-1]["type"] == "function_call_output"
    assert json.loads(second["input"][-2]["arguments"]) == {"key": "z"}


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_blocks_are_replayed_unchanged(owned: Stack, stream: bool) -> None:
    owned.emulator.script(
        Reply("", [("ember_lookup", {"key": "t"})], thinking="I should look t up."),
        Reply("t is 42."),
    )
    body = {**MSG, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    with anthropic.Anthropic(base_url=owned.url, api_key="k", max_retries=0) as c:
        if stream:
            with c.messages.stream(**body) as s:
                final = s.get_final_message()
        else:
            final = c.messages.create(**body)
    # The emulator refuses a modified thinking block with a 400, as the real API does.
    assert final.content[-1].text == "t is 42."  # type: ignore[union-attr]
    replayed = owned.emulator.requests[1].json()["messages"][-2]["content"][0]
    assert replayed["type"] == "thinking" and replayed["thinking"] == "I should look t up."
