"""The level texts: constant, cumulative, inside the sentinel."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from ember.shaping.verbosity import CLOSE_TAG, OPEN_TAG, steering_text

#: Changing a level text busts every user's cache on upgrade. If this fails, you changed a
#: text: add a new level instead, or update the digest knowingly (and say so in the changelog).
FROZEN_DIGESTS = {
    1: "8069aa191921bdea",
    2: "f78d1526374a9445",
    3: "4130c942e0307ae1",
    4: "0a24cc601c2b1293",
}


def test_level_zero_renders_nothing() -> None:
    assert steering_text(0) is None


def test_levels_are_cumulative_and_framed_by_the_sentinel() -> None:
    blocks = [steering_text(n) for n in range(1, 5)]
    for lower, higher in itertools.pairwise(blocks):
        assert lower is not None and higher is not None
        rules = lower.removesuffix(CLOSE_TAG)
        assert higher.startswith(rules)
        assert len(higher) > len(lower)
    for block in blocks:
        assert block is not None
        assert block.startswith(OPEN_TAG) and block.endswith(CLOSE_TAG)
        assert block.count(OPEN_TAG) == 1


def test_texts_are_byte_stable() -> None:
    digests = {
        n: hashlib.sha256(str(steering_text(n)).encode()).hexdigest()[:16] for n in range(1, 5)
    }
    assert digests == FROZEN_DIGESTS


@pytest.mark.parametrize("bad", [-1, 5, 99])
def test_a_level_out_of_range_is_an_error(bad: int) -> None:
    with pytest.raises(ValueError, match=r"0\.\.4"):
        steering_text(bad)
