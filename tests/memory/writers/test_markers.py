"""Merging: text outside the markers is never changed, byte for byte."""

from __future__ import annotations

import pytest

from ember.memory import MemoryInputError
from ember.memory.writers.markers import END, START, merge, wrap

BLOCK = wrap("## Project memory\n\n- fact")


def test_a_file_without_markers_keeps_every_byte_and_gets_the_block_appended() -> None:
    user = "# Notes\n\nMy own text   with trailing spaces   \n\tand a tab"
    out = merge(user, BLOCK)
    assert out.startswith(user)
    assert out[len(user) :] == "\n\n" + BLOCK + "\n"


def test_markers_in_the_middle_only_the_span_changes() -> None:
    before = "# Title\r\nkeep me exactly\n\n"
    after = "\n\n## After\nuser text ✓ with unicode\n"
    old = before + START + "\nold fact\n" + END + after
    out = merge(old, BLOCK)
    assert out == before + BLOCK + after
    assert merge(out, BLOCK) == out  # idempotent


def test_empty_file_is_just_the_block() -> None:
    assert merge("", BLOCK) == BLOCK + "\n"


@pytest.mark.parametrize(
    "broken",
    [
        f"a\n{START}\nno end",
        f"a\n{END}\n{START}\n",
        f"{START}\n{END}\n{START}\n{END}\n",
        f"only an end {END}",
    ],
)
def test_broken_markers_are_refused_rather_than_guessed(broken: str) -> None:
    with pytest.raises(MemoryInputError, match="unmatched ember markers"):
        merge(broken, BLOCK)
