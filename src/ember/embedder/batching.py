"""How a list of texts is cut into model calls. Pure: token lengths in, index groups out.

Texts are grouped by length so a short query is never padded to the length of a long memory:
padding does not change a vector (the graph masks it out) but it costs compute quadratically
in attention and linearly everywhere else, and bulk import of 10-word memories mixed with a few
paragraphs would otherwise run at paragraph speed.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_batches(lengths: Sequence[int], max_batch: int, max_tokens: int) -> list[list[int]]:
    """Group indexes of ``lengths`` into batches of similar length.

    Each batch has at most ``max_batch`` texts and, padded to its longest member, at most
    ``max_tokens`` tokens (a single text longer than that still gets a batch of its own).
    Deterministic: ties in length keep input order, so the same input always makes the same
    calls and therefore the same float results.
    """
    if max_batch < 1 or max_tokens < 1:
        raise ValueError("max_batch and max_tokens must be positive")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Sorted ascending, so the newcomer is the longest member once added.
        if current and (len(current) >= max_batch or (len(current) + 1) * lengths[i] > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
