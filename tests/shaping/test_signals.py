"""User signals from structure and timing."""

from __future__ import annotations

from ember.shaping.controller import Signal
from ember.shaping.policy import TurnKind
from ember.shaping.signals import PreviousAnswer, asks_for_more, detect_signal, reading_seconds

ASK = TurnKind.NEW_ASK
LONG = 4000  # characters: ~1000 tokens, a minute to skim


def answer(outcome: str = "ok", handed_back: bool = True, chars: int = LONG) -> PreviousAnswer:
    return PreviousAnswer(outcome, handed_back, chars, first_visible_at=100.0)


def test_reading_model_scales_with_the_answer() -> None:
    assert reading_seconds(4000) == 4000 / 4 / 16
    assert reading_seconds(8000) == 2 * reading_seconds(4000)


def test_interrupt_is_a_cancelled_stream_followed_by_a_new_message() -> None:
    assert detect_signal(answer("cancelled", False), ASK, "stop, do X", 101.0) == Signal.TOO_MUCH
    # a tool-result turn after a cancel is no user turn
    mech = TurnKind.MECHANICAL_CONTINUATION
    assert detect_signal(answer("cancelled", False), mech, "", 101.0) is None


def test_fast_skip_is_a_reply_before_the_answer_could_be_skimmed() -> None:
    skim = reading_seconds(LONG)
    assert detect_signal(answer(), ASK, "next thing", 100.0 + skim / 2) == Signal.TOO_MUCH
    assert detect_signal(answer(), ASK, "next thing", 100.0 + skim * 2) == Signal.NEUTRAL


def test_quick_replies_to_short_answers_or_tool_calls_are_no_skip() -> None:
    assert detect_signal(answer(chars=200), ASK, "ok", 100.1) == Signal.NEUTRAL
    assert detect_signal(answer(handed_back=False), ASK, "ok", 100.1) == Signal.NEUTRAL


def test_asking_for_more_detail_is_too_little() -> None:
    assert detect_signal(answer(), ASK, "Can you explain that in more detail?", 500.0) == (
        Signal.TOO_LITTLE
    )


def test_too_little_needs_a_short_follow_up_not_a_harness_reminder() -> None:
    reminder = "<system-reminder>Please elaborate on any plan.</system-reminder>"
    assert not asks_for_more(reminder + "thanks, ship it")
    assert asks_for_more(reminder + "please elaborate")
    assert not asks_for_more("explain " + "x" * 600)
    assert not asks_for_more("the unexplained failure in elaborated.py")  # word boundaries


def test_no_observation_without_a_known_previous_answer_or_after_a_failure() -> None:
    assert detect_signal(None, ASK, "hi", 1.0) is None
    assert detect_signal(answer("upstream_error", False), ASK, "retry", 101.0) is None
