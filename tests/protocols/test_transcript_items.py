"""Transcript items: who spoke and what kind of thing each message is, by structure alone,
on the requests Claude Code and Codex really send."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, adapter_for_path
from ember.protocols.base import AssembledMessage, Block, ProtocolAdapter, TranscriptItem
from ember.protocols.calls import WALKS, NamesBefore, RawCall
from ember.protocols.forking import fork_request
from ember.protocols.transcript_items import ARGS_LIMIT, answer_items, transcript_items
from tests.client_fixtures import ClientRequest, all_requests, load_scenario
from tests.protocols.fork_support import (
    QUESTION,
    anthropic_answer_sse,
    assemble,
    chat_answer_sse,
    chat_body,
    responses_answer_sse,
)


def last_main(client: str, scenario: str) -> ClientRequest:
    return [r for r in load_scenario(client, scenario) if r.kind == "main"][-1]


def shape(items: list[TranscriptItem]) -> list[tuple[int, str, str]]:
    return [(i.position, i.role, i.kind) for i in items]


def test_claude_code_conversation_reads_as_ask_call_result_answer_ask() -> None:
    items = transcript_items(ANTHROPIC, last_main("claude-code", "print-then-continue").json())
    assert shape(items) == [
        (0, "user", "user"),
        (1, "assistant", "assistant"),
        (2, "tool", "tool_result"),
        (3, "assistant", "assistant"),
        (4, "user", "user"),
    ]
    ask, call, result, answer, again = items
    assert ask.text == "Please read notes.txt and tell me what it says."
    assert call.text == 'called Read({"file_path":"/work/proj/notes.txt"})'
    assert result.call_ids == call.call_ids and result.tool_name == "Read"
    assert "buy milk" in result.text
    assert answer.text.startswith("notes.txt holds the notes")
    assert again.text == "Thanks. In one word: is it a todo list?"


def test_claude_md_reminder_is_not_taken_for_the_users_words() -> None:
    """The CLAUDE.md and skills reminders share the first message with the ask; cited as
    ``user-stated`` they would be facts the user never said."""
    first = transcript_items(ANTHROPIC, last_main("claude-code", "claude-md").json())[0]
    assert first.text == "Please read notes.txt and tell me what it says."
    assert first.part == 3  # the block the ask is in, after three reminder blocks


def test_codex_conversation_skips_the_prompt_and_the_environment() -> None:
    body = last_main("codex", "agents-md-exec-then-resume").json()
    items = transcript_items(OPENAI_RESPONSES, body)
    assert shape(items) == [
        (3, "user", "user"),
        (4, "assistant", "assistant"),
        (5, "tool", "tool_result"),
        (6, "assistant", "assistant"),
        (7, "user", "user"),
    ]
    assert items[1].text == 'called exec_command({"cmd":"cat notes.txt"})'
    assert items[2].tool_name == "exec_command" and items[2].call_ids == ("call_emu_00000001_0",)


@pytest.mark.parametrize(
    "request_",
    [r for r in all_requests() if r.kind in ("main", "subagent")],
    ids=lambda r: r.name,
)
def test_every_recorded_result_answers_a_call_made_before_it(request_: ClientRequest) -> None:
    adapter = adapter_for_path(request_.path)  # each client's wire format, by where it sent
    assert adapter is not None
    items = transcript_items(adapter, request_.json())
    called: set[str] = set()
    for item in items:
        assert "<system-reminder>" not in item.text and "<environment_context>" not in item.text
        if item.role == "assistant":
            called.update(item.call_ids)
        elif item.role == "tool":
            assert item.call_ids and item.call_ids[0] in called
    assert sum(i.kind == "user" for i in items) >= 1
    assert len({(i.position, i.part) for i in items}) == len(items)


def test_tool_results_beside_user_text_are_split_into_results_then_the_users_words() -> None:
    body = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": "boom",
                        "is_error": True,
                    },
                    {
                        "type": "text",
                        "text": "<system-reminder>\nTodo list changed.\n</system-reminder>",
                    },
                    {"type": "text", "text": "Stop, use the staging database instead."},
                ],
            },
        ]
    }
    _, error, words = transcript_items(ANTHROPIC, body)
    assert (error.position, error.part, error.kind, error.text) == (1, 0, "tool_error", "boom")
    assert error.tool_name == "Bash"
    assert (words.position, words.part, words.kind) == (1, 2, "user")
    assert words.text == "Stop, use the staging database instead."


def test_chat_tool_error_is_told_by_structured_fields_only() -> None:
    body = json.loads(chat_body())
    body["messages"].append(
        {"role": "tool", "tool_call_id": "call_a", "content": '{"exit_code": 1}'}
    )
    kinds = [i.kind for i in transcript_items(OPENAI_CHAT, body)]
    assert kinds == ["user", "assistant", "tool_result", "user", "tool_error"]


def test_long_call_arguments_are_truncated_in_the_call_line() -> None:
    body = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t",
                        "name": "Write",
                        "input": {"content": "x" * 5000},
                    }
                ],
            }
        ]
    }
    [item] = transcript_items(ANTHROPIC, body)
    assert len(item.text) <= len("called Write()") + ARGS_LIMIT and item.text.endswith("…)")


def test_thinking_only_answer_has_no_transcript_item() -> None:
    answer = AssembledMessage(
        "anthropic", blocks=[Block("thinking", text="hm", signature="s")], complete=True
    )
    assert answer_items(ANTHROPIC, answer, 7) == []


def fork_case(adapter: ProtocolAdapter) -> tuple[bytes, Any]:
    if adapter is ANTHROPIC:
        return last_main("claude-code", "print-then-continue").body, assemble(
            ANTHROPIC, anthropic_answer_sse()
        )
    if adapter is OPENAI_CHAT:
        return chat_body(), assemble(OPENAI_CHAT, chat_answer_sse())
    return last_main("codex", "exec-then-resume").body, assemble(
        OPENAI_RESPONSES, responses_answer_sse()
    )


@pytest.mark.parametrize(
    "adapter", [ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES], ids=lambda a: a.name
)
def test_answer_items_are_the_items_the_resent_history_will_hold(adapter: ProtocolAdapter) -> None:
    """The runner stores the answer once; when the client resends it as history the same
    items (positions, parts, text, ids) come back, so nothing is stored twice."""
    recorded, answer = fork_case(adapter)
    n = adapter.message_count(json.loads(recorded))
    forked = json.loads(fork_request(adapter, recorded, answer, QUESTION))
    expected = answer_items(adapter, answer, n)
    placeholders = [
        i for i in transcript_items(adapter, forked) if i.role == "tool" and i.position > n
    ]
    assert expected and all(i.position >= n for i in expected)
    assert [
        i for i in transcript_items(adapter, forked) if i.role == "assistant" and i.position >= n
    ] == expected
    assert {c for i in expected for c in i.call_ids} == {
        c for i in placeholders for c in i.call_ids
    }
    assert transcript_items(adapter, forked)[-1].text == QUESTION


@pytest.mark.parametrize(
    "request_",
    [r for r in all_requests() if r.kind in ("main", "subagent")],
    ids=lambda r: r.name,
)
def test_reading_from_a_position_gives_exactly_the_full_reads_items_there(
    request_: ClientRequest,
) -> None:
    """The shadow reads only what follows its recording; any difference from the full read
    would change a message's id and break the evidence pointing at it."""
    adapter = ANTHROPIC if request_.client == "claude-code" else OPENAI_RESPONSES
    body = request_.json()
    full = transcript_items(adapter, body)
    for start in range(adapter.message_count(body) + 2):
        wanted = [i for i in full if i.position == 0 or i.position >= start]
        assert transcript_items(adapter, body, from_position=start) == wanted


def test_a_result_read_from_a_position_keeps_the_tool_name_of_its_earlier_call() -> None:
    body = json.loads(chat_body())
    full = transcript_items(OPENAI_CHAT, body)
    tools = [i for i in full if i.role == "tool"]
    assert tools and all(i.tool_name for i in tools)
    assert [
        i for i in transcript_items(OPENAI_CHAT, body, tools[0].position) if i.role == "tool"
    ] == tools


def _tool_conversation(ids: list[tuple[str, str]], results: list[str]) -> dict[str, Any]:
    """An Anthropic conversation: a user ask, then per call (id, name) an assistant call and,
    after all of them, one user turn per id in ``results`` (ids may repeat or be unknown)."""
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": n, "input": {}}]}
        for i, n in ids
    ]
    messages += [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": r, "content": "ok"}]}
        for r in results
    ]
    return {"messages": [{"role": "user", "content": "go"}, *messages]}


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["Bash", "Read"]))),
    results=st.lists(st.sampled_from("abcde"), max_size=4),
)
def test_reading_from_a_position_names_results_as_the_full_read_does(
    calls: list[tuple[str, str]], results: list[str]
) -> None:
    """Call ids that repeat (a later call wins), results whose call is far back or missing:
    a read from any position names each result exactly as the full read does."""
    body = _tool_conversation(calls, results)
    full = transcript_items(ANTHROPIC, body)
    for start in range(len(body["messages"]) + 1):
        wanted = [i for i in full if i.position == 0 or i.position >= start]
        assert transcript_items(ANTHROPIC, body, from_position=start) == wanted


def test_a_result_after_a_long_history_walks_back_only_to_its_call() -> None:
    """A request of a long session: its newest result's call is in the message before it, so
    the earlier calls are not walked (a walk of the whole history on every request was most
    of the transcript's cost in a long Claude Code session)."""
    walked: list[Any] = []

    def walk(messages: list[Any]) -> Iterator[RawCall]:
        walked.extend(messages)
        return WALKS["anthropic"](messages)

    body = _tool_conversation([(f"c{k}", "Bash") for k in range(300)], ["c299"])
    earlier = body["messages"][1:-1]
    names = NamesBefore(walk, earlier, fallback={})
    assert names.get("c299") == "Bash"
    assert len(walked) == 1
    assert names.get("c0") == "Bash" and names.get("nope") is None
    assert len(walked) == len(earlier)
