"""Echo ratio: n-gram overlap of an answer with its context."""

from __future__ import annotations

from ember.shaping.echo import context_text, echo_ratio

FILE = " ".join(f"line{i} = compute(value{i}, other{i})" for i in range(40))


def test_pasting_back_the_context_scores_one_and_new_text_zero() -> None:
    assert echo_ratio(FILE, "read this:\n" + FILE) == 1.0
    fresh = "the handler indexes the password before validating it so empty input crashes"
    assert echo_ratio(fresh, FILE) == 0.0


def test_partial_echo_is_the_share_of_distinct_ngrams_found() -> None:
    half = " ".join(FILE.split()[:80])
    answer = half + " " + " ".join(f"novel{i}" for i in range(80))
    ratio = echo_ratio(answer, FILE)
    assert ratio is not None and 0.4 < ratio < 0.6


def test_short_answers_have_no_ratio() -> None:
    assert echo_ratio("Done.", FILE) is None


def test_context_text_walks_any_body_and_skips_identifiers() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "alpha"}]},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "beta", "signature": "SIG"}],
            },
        ],
        "instructions": "gamma",
    }
    text = context_text(body)
    assert text.split("\n") == ["alpha", "beta", "gamma"]
    assert context_text({"a": "x" * 50}, limit=10) == "x" * 10


def test_context_text_keeps_the_newest_content_within_the_limit() -> None:
    body = {"messages": [{"content": "old " * 1000}, {"content": "the newest tool output"}]}
    text = context_text(body, limit=40)
    assert text.endswith("the newest tool output") and len(text) <= 40
