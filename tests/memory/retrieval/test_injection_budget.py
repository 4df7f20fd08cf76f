"""The injection budget: hard caps, the floor, whole items, the same bytes every time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.config import load_settings
from ember.errors import ConfigError
from ember.memory import InjectionBudget, Memory, MemoryHit, render_block
from ember.memory.retrieval.injection_budget import (
    FRAME_TOKENS,
    MAX_ITEMS_CAP,
    MAX_TOKENS_CAP,
    MIN_SCORE_FLOOR,
)
from ember.memory.retrieval.render import render_line
from ember.tokens import count_tokens

NOW = 1_790_000_000.0


def hit(i: int, content: str, score: float | None = None) -> MemoryHit:
    m = Memory(id=f"{i:012x}", content=content, created_at=NOW, valid_from=NOW)
    s = 0.9 - i / 1000 if score is None else score
    return MemoryHit(m, score=s, similarity=0.0, lexical=None, recency=1.0)


def test_code_cannot_lift_the_caps() -> None:
    b = InjectionBudget(max_tokens=100_000, max_items=500, min_score=0.0)
    assert (b.max_tokens, b.max_items, b.min_score) == (1024, 10, MIN_SCORE_FLOOR)
    assert InjectionBudget(min_score=float("nan")).min_score == MIN_SCORE_FLOOR
    lower = InjectionBudget(max_tokens=200, max_items=3, min_score=0.6)
    assert (lower.max_tokens, lower.max_items, lower.min_score) == (200, 3, 0.6)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("EMBER_MEMORY_BUDGET_TOKENS", "4096"),
        ("EMBER_MEMORY_MAX_ITEMS", "50"),
        ("EMBER_MEMORY_MIN_SCORE", "0.05"),
    ],
)
def test_settings_refuse_a_value_past_a_cap_naming_the_key(var: str, value: str) -> None:
    with pytest.raises(ConfigError, match=var):
        load_settings(env={var: value})


def test_floor_item_cap_and_token_cap() -> None:
    hits = [hit(i, f"fact number {i} about the build") for i in range(30)]
    hits.insert(1, hit(999, "unrelated", score=MIN_SCORE_FLOOR - 0.01))
    inj = InjectionBudget().select(hits)
    assert len(inj.hits) == MAX_ITEMS_CAP
    assert "999" not in inj.text.replace("fact number 999", "")
    assert "[0000000003e7]" not in inj.text
    small = InjectionBudget(max_tokens=120).select(hits)
    assert 0 < len(small.hits) < 10
    assert count_tokens(small.text) <= 120
    # Whole items only, best first: the kept ones are a prefix of the qualifying hits.
    kept = tuple(h.memory.id for h in hits if h.score >= MIN_SCORE_FLOOR)
    assert small.ids == kept[: len(small.hits)]


def test_an_item_that_does_not_fit_ends_the_block() -> None:
    hits = [hit(0, "short fact"), hit(1, "long " * 2000), hit(2, "another short fact")]
    inj = InjectionBudget().select(hits)
    assert inj.ids == (hits[0].memory.id,)


def test_nothing_qualifies_means_no_block() -> None:
    inj = InjectionBudget().select([hit(0, "x", score=0.1)])
    assert inj.text == "" and inj.hits == () and inj.tokens == 0


@given(
    st.lists(st.text(min_size=1, max_size=600), min_size=1, max_size=25),
    st.integers(1, 2000),
    st.integers(0, 20),
)
def test_the_block_never_exceeds_the_budget(texts: list[str], tokens: int, items: int) -> None:
    budget = InjectionBudget(max_tokens=tokens, max_items=items)
    inj = budget.select([hit(i, t) for i, t in enumerate(texts) if t.strip()])
    assert inj.tokens <= min(tokens, MAX_TOKENS_CAP)
    assert len(inj.hits) <= min(items, MAX_ITEMS_CAP)
    assert inj.text == render_block([h.memory for h in inj.hits])
    assert inj.tokens == count_tokens(inj.text)


def test_same_hits_same_bytes() -> None:
    hits = [hit(i, f"fact {i}") for i in range(5)]
    a = InjectionBudget().select(hits).text
    b = InjectionBudget().select([hit(i, f"fact {i}") for i in range(5)]).text
    assert a == b and a.encode() == b.encode()


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=12))
def test_a_block_costs_its_frame_plus_each_line_and_newline(texts: list[str]) -> None:
    """What ``select`` adds up per candidate is the count of the whole block, exactly."""
    memories = [hit(i, t).memory for i, t in enumerate(texts) if t.split()]
    lines = [render_line(m) for m in memories]
    summed = FRAME_TOKENS + sum(count_tokens(line) + 1 for line in lines)
    assert not lines or summed == count_tokens(render_block(memories))
