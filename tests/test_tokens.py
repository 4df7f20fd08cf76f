"""The token approximation errs high on the text memories are made of."""

from __future__ import annotations

from ember.tokens import count_tokens


def test_counts() -> None:
    assert count_tokens("") == 0
    # cl100k: 12 tokens; the estimate may be higher, never far lower
    assert 11 <= count_tokens("The user prefers tabs over spaces since 2024-03-01.") <= 18
    assert count_tokens("你好世界") >= 4  # each CJK character is at least one token
    assert count_tokens("a" * 70) == 10
    assert count_tokens("word " * 100) >= 100
