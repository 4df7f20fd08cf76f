"""The general marker rules: only ember's own span ever changes, and blocks of two features
sharing a file leave each other alone."""

from __future__ import annotations

import pytest

from ember.markers import MarkerError, Markers

LEARN = Markers("learn")
MEMORY = Markers("memory")


def test_markers_are_named_after_the_feature() -> None:
    assert LEARN.start == "<!-- ember:learn:start -->"
    assert LEARN.end == "<!-- ember:learn:end -->"
    with pytest.raises(ValueError, match="marker name"):
        Markers("Learn Block")


def test_merge_then_remove_gives_the_users_file_back() -> None:
    for user in ("", "# Notes\n", "# Notes\n\nno final newline", "a\r\nb\r\n"):
        newline = "\r\n" if "\r\n" in user else "\n"
        merged = LEARN.merge(user, LEARN.wrap("- one", newline), newline=newline)
        # a last line without a line break keeps the one ember had to add before the block
        expected = user if not user or user.endswith("\n") else user + newline
        assert LEARN.remove(merged) == expected


def test_remove_keeps_text_on_both_sides() -> None:
    text = f"top\n\n{LEARN.start}\nx\n{LEARN.end}\nbottom\n"
    assert LEARN.remove(text) == "top\n\nbottom\n"
    assert LEARN.remove(f"{LEARN.start}\nx\n{LEARN.end}\n\nbelow\n") == "below\n"


def test_two_features_in_one_file_leave_each_other_alone() -> None:
    text = MEMORY.merge("# Mine\n", MEMORY.wrap("- a fact"))
    text = LEARN.merge(text, LEARN.wrap("- a lesson"))
    rewritten = LEARN.merge(text, LEARN.wrap("- a new lesson"))
    assert MEMORY.body(rewritten) == "- a fact\n"
    assert LEARN.body(rewritten) == "- a new lesson\n"
    assert rewritten.startswith("# Mine\n\n" + MEMORY.wrap("- a fact"))


def test_body_is_none_without_a_block() -> None:
    assert LEARN.body("just text") is None


@pytest.mark.parametrize(
    "broken",
    [
        f"a\n{LEARN.start}\nno end",
        f"a\n{LEARN.end}\n{LEARN.start}\n",
        f"{LEARN.start}\n{LEARN.end}\n{LEARN.start}\n{LEARN.end}\n",
    ],
)
def test_broken_markers_are_refused_with_the_file_named(broken: str) -> None:
    with pytest.raises(MarkerError, match=r"CLAUDE\.local\.md has unmatched ember markers"):
        LEARN.merge(broken, LEARN.wrap("x"), where="CLAUDE.local.md")
    with pytest.raises(MarkerError):
        LEARN.remove(broken)
