"""Shadow memory's pure parts: the question, reading the answer, evidence, the rules."""

from __future__ import annotations

import pytest

from ember.protocols.base import AssembledMessage, Block
from ember.shadow import evidence
from ember.shadow.models import FactIn, parse_facts
from ember.shadow.policy import Backoff, hot_blocker, turn_ended
from ember.shadow.question import cold_pages, hot_question, parse_answer
from ember.store.transcript_rows import Lineage, Message, place

S = "sess-1"


def msg(i: int, kind: str = "user", session: str = S, text: str = "hello") -> Message:
    role = {"user": "user", "assistant": "assistant"}.get(kind, "tool")
    return Message(i, f"m{i:03d}", session, 1, i, role, kind, text)


def test_the_question_lists_each_unread_message_with_its_id_first() -> None:
    q = hot_question([msg(1, text="We deploy to eu-west-1."), msg(2, "tool_result")], S)
    lines = [ln for ln in q.splitlines() if ln.startswith("m:")]
    assert lines[0].startswith("m:m001 user: We deploy to eu-west-1.")
    assert lines[1].startswith("m:m002 tool_result:")
    assert "```json" in q and S in q


def test_client_context_is_left_out_of_the_rendered_lines() -> None:
    text = "<system-reminder>huge skills list</system-reminder>\nuse tabs, always"
    q = hot_question([msg(1, text=text)], S)
    assert "skills list" not in q and "m:m001 user: use tabs, always" in q


def test_cold_pages_never_split_a_line_and_stay_under_the_budget() -> None:
    messages = [msg(i, text="word " * 300) for i in range(40)]
    pages = cold_pages(messages, page_tokens=2_000)
    assert sum(len(p) for p in pages) == 40 and len(pages) > 1
    assert all(p and all(line.startswith("m:") for line in p) for p in pages)


def test_the_answer_is_read_from_its_fenced_json_block() -> None:
    text = 'Here you go:\n```json\n{"facts": []}\n```\nthanks'
    assert parse_answer(text) == {"facts": []}
    with pytest.raises(ValueError, match="no fenced json"):
        parse_answer("I think the project uses Postgres.")


def test_a_bad_fact_is_kept_with_its_error_and_its_sibling_survives() -> None:
    facts = parse_facts(
        {
            "facts": [
                {
                    "content": "Deploys go to eu-west-1",
                    "evidence": [{"kind": "user-stated", "messageId": "m001"}],
                },
                {"content": "Guessed", "evidence": [{"kind": "guessed", "messageId": "m001"}]},
                {"content": "No evidence", "evidence": []},
            ]
        }
    )
    assert [f.error is None for f in facts] == [True, False, False]
    assert facts[1].content == "Guessed" and "kind" in (facts[1].error or "")


def test_session_evidence_is_only_for_observed_outcomes() -> None:
    [bad] = parse_facts(
        {"facts": [{"content": "x", "evidence": [{"kind": "user-stated", "sessionId": S}]}]}
    )
    assert bad.error is not None and "observed-outcome" in bad.error


def fact(kind: str, target: str) -> FactIn:
    key = "sessionId" if target == S else "messageId"
    return FactIn.model_validate({"content": "c", "evidence": [{"kind": kind, key: target}]})


def test_evidence_must_point_at_a_message_of_the_right_kind_in_this_session() -> None:
    found = {
        "m001": msg(1, "user"),
        "m002": msg(2, "tool_result"),
        "m003": msg(3, "assistant"),
        "m009": msg(9, "user", session="other"),
    }
    assert evidence.check(fact("user-stated", "m001"), S, found) is None
    assert evidence.check(fact("tool-verified", "m002"), S, found) is None
    assert evidence.check(fact("observed-outcome", S), S, found) is None
    assert "is assistant" in (evidence.check(fact("user-stated", "m003"), S, found) or "")
    assert "another session" in (evidence.check(fact("user-stated", "m009"), S, found) or "")
    assert "not a message" in (evidence.check(fact("user-stated", "m404"), S, found) or "")
    assert "tool_result" in (evidence.check(fact("tool-verified", "m001"), S, found) or "")


def test_three_failures_in_a_generation_back_off_six_hours() -> None:
    b = Backoff()
    for t in (0.0, 1.0, 2.0):
        assert not b.active(t)
        b = b.failed(t)
    assert b.active(3.0) and b.active(2.0 + 6 * 3600 - 1) and not b.active(2.0 + 6 * 3600)


def test_hot_needs_a_fresh_prefix_of_the_same_generation_that_allows_text() -> None:
    assert hot_blocker(True, True, None) is None
    assert "prefix" in (hot_blocker(False, False, None) or "")
    assert "generation" in (hot_blocker(True, False, None) or "")
    assert hot_blocker(True, True, "tool_choice forces a tool") == "tool_choice forces a tool"


def test_a_turn_ends_on_a_final_answer_without_tool_calls() -> None:
    done = AssembledMessage(
        "anthropic", blocks=[Block("text", "ok")], stop_reason="end_turn", complete=True
    )
    more = AssembledMessage(
        "anthropic",
        blocks=[Block("tool_use", id="t", name="Read")],
        stop_reason="tool_use",
        complete=True,
    )
    assert turn_ended(done) and not turn_ended(more) and not turn_ended(None)


def test_a_history_that_extends_the_last_request_keeps_its_generation() -> None:
    seen = Lineage(
        generation=3, first_digest="a", request_count=3, request_last_digest="c", recorded=4
    )
    assert place(seen, ["a", "b", "c", "X", "d"], 3) == (3, 4)  # new from the answer's position
    assert place(seen, ["z", "b", "c", "d"], 3) == (4, 0)  # the start changed: a compaction
    assert place(None, ["a"], 2) == (3, 0)  # unknown here: a generation after the file's last
