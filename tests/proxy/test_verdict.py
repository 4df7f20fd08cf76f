"""The outcome judged from the answer itself, not only from HTTP."""

from __future__ import annotations

import pytest

from ember.exchange import Outcome, OutcomeKind
from ember.protocols.base import AnswerError, AssembledMessage
from ember.proxy.verdict import judge

OVERLOADED = AnswerError("overloaded_error", "Overloaded", 529)


def outcome(
    kind: OutcomeKind = "ok",
    *,
    complete: bool = True,
    error: AnswerError | None = None,
    streamed: bool = True,
    status: int = 200,
    message: bool = True,
) -> Outcome:
    msg = AssembledMessage("anthropic", complete=complete, error=error) if message else None
    return Outcome(status, kind, msg, streamed, 10.0)


def test_error_event_in_a_200_stream_is_stream_error_and_keeps_the_status_sent() -> None:
    judged = judge(outcome(error=OVERLOADED, complete=False))
    assert (judged.kind, judged.status) == ("stream_error", 200)
    assert judged.error == "overloaded_error: Overloaded"


def test_200_json_error_body_is_upstream_error_and_keeps_the_status_sent() -> None:
    """The client saw 200: a row saying 529 could not be matched with the client's log."""
    judged = judge(outcome(error=OVERLOADED, streamed=False))
    assert (judged.kind, judged.status) == ("upstream_error", 200)
    assert judged.error == "overloaded_error: Overloaded"


@pytest.mark.parametrize("kind", ["cut", "cancelled"])
def test_error_event_outranks_the_connection_ending_after_it(kind: OutcomeKind) -> None:
    """An SDK raises on the error event and hangs up: that is no user interrupt."""
    judged = judge(outcome(kind, error=OVERLOADED, complete=False))
    assert (judged.kind, judged.status) == ("stream_error", 200)


def test_stream_without_its_terminal_event_is_cut_and_keeps_its_status() -> None:
    judged = judge(outcome(complete=False))
    assert (judged.kind, judged.status) == ("cut", 200)
    assert judged.error is not None and "final event" in judged.error


def test_stream_with_no_event_at_all_is_cut() -> None:
    assert judge(outcome(message=False)).kind == "cut"


def test_an_error_status_keeps_its_own_status_and_kind() -> None:
    error = AnswerError("rate_limit_error", "slow", 429)
    judged = judge(outcome("upstream_error", error=error, streamed=False, status=429))
    assert (judged.kind, judged.status) == ("upstream_error", 429)


def test_a_200_body_that_is_not_json_is_not_recorded_ok() -> None:
    judged = judge(outcome(streamed=False, message=False))
    assert (judged.kind, judged.status) == ("upstream_error", 200)


def test_a_whole_answer_stays_ok() -> None:
    for streamed in (True, False):
        assert judge(outcome(streamed=streamed)).kind == "ok"
