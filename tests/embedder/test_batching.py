"""plan_batches: every text in exactly one batch, bounded batches, similar lengths together."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.embedder.batching import plan_batches


@given(
    st.lists(st.integers(min_value=1, max_value=300), max_size=200),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=10_000),
)
def test_partition_and_bounds(lengths: list[int], max_batch: int, max_tokens: int) -> None:
    batches = plan_batches(lengths, max_batch, max_tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= max_batch
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= max_tokens or len(batch) == 1
    assert plan_batches(lengths, max_batch, max_tokens) == batches  # deterministic


def test_short_query_is_not_padded_to_a_long_memory() -> None:
    lengths = [300, 12, 290, 11, 13]
    batches = plan_batches(lengths, max_batch=2, max_tokens=10_000)
    assert batches == [[3, 1], [4, 2], [0]]


def test_equal_lengths_keep_input_order() -> None:
    assert plan_batches([5, 5, 5, 5], max_batch=3, max_tokens=100) == [[0, 1, 2], [3]]


def test_token_budget_splits_long_batches() -> None:
    assert plan_batches([256] * 5, max_batch=32, max_tokens=600) == [[0, 1], [2, 3], [4]]


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        plan_batches([1], max_batch=0, max_tokens=10)
