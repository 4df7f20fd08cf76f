"""The emulated model's side of a shadow turn: the choosers, and recognising the question."""

from __future__ import annotations

import json
from typing import Any

from ember.shadow.question import cold_prompt, hot_question, parse_answer
from ember.store.transcript_rows import Message
from ember.testing.replies import Reply
from ember.testing.shadow import (
    PROPOSE_TOOL,
    Line,
    facts_in,
    question_of,
    remember_statements,
    shadow_path,
    shadow_replies,
    user_statements,
)

LINES = [
    Line("m00000000000a", "user", "Deploys go to fly.io. Tests run with pytest -x. What is here?"),
    Line("m00000000000b", "assistant", "The database is PostgreSQL 16."),
    Line("m00000000000c", "tool_result", "We always use uv, never pip."),
    Line("m00000000000d", "user", "Please read notes.txt and tell me what it says."),
    Line("m00000000000e", "user", "thanks! Deploys go to fly.io. Remember that staging is slow."),
]


def test_user_statements_proposes_what_the_user_stated_with_its_message_ids() -> None:
    assert user_statements(LINES, "s") == [
        {
            "content": "Deploys go to fly.io.",
            "category": "convention",
            "evidence": [
                {"kind": "user-stated", "messageId": "m00000000000a"},
                {"kind": "user-stated", "messageId": "m00000000000e"},
            ],
        },
        {
            "content": "Tests run with pytest -x.",
            "category": "convention",
            "evidence": [{"kind": "user-stated", "messageId": "m00000000000a"}],
        },
        {
            "content": "Staging is slow.",
            "category": "convention",
            "evidence": [{"kind": "user-stated", "messageId": "m00000000000e"}],
        },
    ]


def test_remember_statements_still_proposes_only_what_the_user_asked_to_remember() -> None:
    [fact] = remember_statements(LINES, "s")
    assert fact["content"] == "Staging is slow."
    assert fact["evidence"] == [{"kind": "user-stated", "messageId": "m00000000000e"}]


def _messages(*texts: str) -> list[Message]:
    return [Message(i, f"m{i:012x}", "s", 1, i, "user", "user", t) for i, t in enumerate(texts, 1)]


def test_the_hot_and_the_cold_question_are_recognised_and_told_apart() -> None:
    msgs = _messages("The database is PostgreSQL 16.")
    hot = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "user", "content": [{"type": "text", "text": hot_question(msgs, "s")}]},
        ]
    }
    system, user = cold_prompt([f"m:{msgs[0].id} user: {msgs[0].content}"], "s")
    cold = {"instructions": system, "input": user}  # Responses' input may be a bare string
    plain = {"messages": [{"role": "user", "content": "The database is PostgreSQL 16."}]}
    assert (shadow_path(hot), shadow_path(cold), shadow_path(plain)) == ("hot", "cold", None)
    assert question_of(cold) == user


def test_the_same_question_gets_the_same_answer() -> None:
    msgs = _messages("The database is PostgreSQL 16. Can you run the tests?", "hello")
    body: dict[str, Any] = {"messages": [{"role": "user", "content": hot_question(msgs, "s")}]}
    answer = shadow_replies()
    first, second = answer(body, "/v1/messages"), answer(body, "/v1/messages")
    assert first is not None and second is not None and first.text == second.text
    assert parse_answer(first.text) == {
        "facts": [
            {
                "content": "The database is PostgreSQL 16.",
                "category": "convention",
                "evidence": [{"kind": "user-stated", "messageId": msgs[0].id}],
            }
        ]
    }
    assert facts_in(first) == 1
    assert answer({"messages": [{"role": "user", "content": "hello"}]}, "/v1/messages") is None


def test_facts_in_counts_a_fenced_block_or_the_propose_tools_calls() -> None:
    batch = {"facts": [{"content": "a"}, {"content": "b"}]}
    assert facts_in(Reply("```json\n" + json.dumps(batch) + "\n```")) == 2
    assert facts_in(Reply.tool_use(PROPOSE_TOOL, batch)) == 2
    assert facts_in(Reply("no block here")) == 0
    assert facts_in(Reply("```json\n{not json\n```")) == 0
