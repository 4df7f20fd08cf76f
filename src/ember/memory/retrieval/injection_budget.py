"""How much memory one request may carry: tokens, items and a score floor.

Without a cap, ten hits of ~400 tokens each put ~4,000 tokens on every request. The defaults
(1024 tokens, 10 items, score >= ``MIN_SCORE_FLOOR``) are also the hard limits: settings refuse
a value past them at start-up, and a budget built in code is clamped to them, so no
configuration can make injection unbounded or let unrelated memories through.

The floor applies to ``MemoryHit.score``, the number ``ember memory search`` prints and ranks
by (``rank.py``), never to a raw cosine: one number for one decision. Its value was calibrated
on the dev splits of ``bench/memory_quality.py`` (docs/benchmarks.md gives the share of
relevant memories it drops and of irrelevant ones it lets through).
Truncation happens at item boundaries: the block holds whole memories only, best first, and
stops at the first one that does not fit (it never skips ahead, so a lower-ranked memory
can never appear without the higher-ranked ones before it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ember.memory.models import MemoryHit
from ember.memory.retrieval.render import render_line, render_lines
from ember.tokens import count_tokens

MAX_TOKENS_CAP = 1024
MAX_ITEMS_CAP = 10
MIN_SCORE_FLOOR = 0.21
#: The block's frame (open tag, header, close tag and the newlines between them). A block costs
#: its frame plus each line and its newline: lines begin with "- [" and end without
#: whitespace, so no token of the count spans two lines, and the sum is the count of the whole
#: block (``test_injection_budget``) without counting it again for every candidate — that
#: recount, ten times a 4 KB block, was a fifth of a new ask's CPU in the proxy (py-spy).
FRAME_TOKENS = count_tokens(render_lines(["-"])) - count_tokens("-") - 1


@dataclass(frozen=True)
class Injection:
    """The block to inject (``text`` is "" when nothing qualified) and the memories in it."""

    text: str
    hits: tuple[MemoryHit, ...]
    tokens: int

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(h.memory.id for h in self.hits)


@dataclass(frozen=True)
class InjectionBudget:
    max_tokens: int = MAX_TOKENS_CAP
    max_items: int = MAX_ITEMS_CAP
    min_score: float = MIN_SCORE_FLOOR

    def __post_init__(self) -> None:
        floor = self.min_score if math.isfinite(self.min_score) else MIN_SCORE_FLOOR
        object.__setattr__(self, "max_tokens", max(0, min(int(self.max_tokens), MAX_TOKENS_CAP)))
        object.__setattr__(self, "max_items", max(0, min(int(self.max_items), MAX_ITEMS_CAP)))
        object.__setattr__(self, "min_score", max(floor, MIN_SCORE_FLOOR))

    def select(self, hits: Sequence[MemoryHit]) -> Injection:
        """From ``hits`` (already ranked), skip those scoring under the floor and keep the
        longest run of the rest that fits the item and token caps."""
        chosen: list[MemoryHit] = []
        lines: list[str] = []
        cost = FRAME_TOKENS
        for hit in hits:
            if len(chosen) >= self.max_items:
                break
            if hit.score < self.min_score:
                continue
            line = render_line(hit.memory)
            more = line_tokens(line) + 1  # the line and its newline
            if cost + more > self.max_tokens:
                break
            cost += more
            chosen.append(hit)
            lines.append(line)
        return Injection(render_lines(lines), tuple(chosen), cost if chosen else 0)


@functools.lru_cache(maxsize=4096)
def line_tokens(line: str) -> int:
    """``count_tokens`` of one rendered memory line, remembered: a project's facts are
    injected again and again, and counting ten lines was 0.6 ms of every ask's event-loop
    time (the count is a pure function of the text, so a remembered one is exact)."""
    return count_tokens(line)
