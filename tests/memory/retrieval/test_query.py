"""MemoryQuery: what the search is made of, and in which order."""

from __future__ import annotations

from ember.memory import MemoryQuery
from ember.memory.retrieval.query import EMBED_WINDOW_CHARS, SHORT_ASK_WINDOW_CHARS


def test_embedding_input_puts_assistant_turns_then_tools_then_user_last() -> None:
    q = MemoryQuery.build("fix the flaky test", ["$ pytest\nFAILED test_io"], ["I ran the suite."])
    assert (
        q.to_embedding_input()
        == "I ran the suite.\n\n$ pytest\nFAILED test_io\n\nfix the flaky test"
    )


def test_build_keeps_only_the_most_recent_context_in_order() -> None:
    q = MemoryQuery.build("ask", ["t1", "t2", "t3", "t4"], ["a1", "a2", "a3"])
    assert q.tool_outputs == ("t2", "t3", "t4")
    assert q.assistant_turns == ("a2", "a3")
    assert q.lexical_texts() == ("ask", "t4", "t3", "t2", "a3", "a2")


def test_nothing_is_truncated() -> None:
    long_user = "word " * 5000 + "the-fact-at-the-very-end"
    q = MemoryQuery.build(long_user, ["x" * 20000])
    assert q.to_embedding_input().endswith("the-fact-at-the-very-end")
    assert len(q.to_embedding_input()) > 45000


def test_blank_parts_are_dropped_and_an_empty_query_is_empty() -> None:
    assert MemoryQuery.build("  ", ["", " "], ["\n"]).is_empty
    assert MemoryQuery.build("q", ["", "tool"]).to_embedding_input() == "tool\n\nq"


def test_within_the_encoders_window_the_ask_is_always_embedded() -> None:
    q = MemoryQuery.build(
        "which database does staging use?",
        ["x" * 5000, "tail of output"],
        ["assistant said " * 100],
    )
    text = q.to_embedding_input(window_chars=200)
    assert len(text) <= 200
    assert text.endswith("which database does staging use?")
    assert "tail of output" in text  # the newest context fills the rest, tails first


def test_an_ask_longer_than_the_window_keeps_its_end() -> None:
    q = MemoryQuery("reminder " * 100 + "so: which database?")
    assert q.to_embedding_input(window_chars=50).endswith("so: which database?")


def test_an_ask_that_names_its_subject_is_embedded_alone() -> None:
    """The query vector of an ask with content is the ask's own: 15 word pieces, not the
    225 of the ask inside 1,000 characters of tool output (what memory cost per request)."""
    q = MemoryQuery.build(
        "which database does staging use?", ["x" * 5000 + " tail"], ["assistant said " * 100]
    )
    assert q.vector_input() == "which database does staging use?"
    assert "tail" in " ".join(q.lexical_texts())  # the context still reaches the keywords


def test_an_ask_too_short_to_say_what_it_is_about_borrows_the_newest_context() -> None:
    q = MemoryQuery.build("yes, do it", ["$ fly deploy --app billing"], ["Deploy to fly.io?"])
    text = q.vector_input()
    assert text.endswith("yes, do it")
    assert "fly deploy --app billing" in text
    assert len(text) <= SHORT_ASK_WINDOW_CHARS
    long_context = MemoryQuery.build("go on", ["y" * 5000])
    assert len(long_context.vector_input()) <= SHORT_ASK_WINDOW_CHARS


def test_a_long_ask_keeps_its_end_within_the_window() -> None:
    q = MemoryQuery("reminder " * 300 + "so: which database?")
    assert q.vector_input().endswith("so: which database?")
    assert len(q.vector_input()) <= EMBED_WINDOW_CHARS
