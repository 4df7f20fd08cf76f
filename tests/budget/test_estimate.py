"""What a request holds of its project's limits while it runs: its estimate, on plain bodies."""

from __future__ import annotations

import pytest

from ember.budget import estimate
from ember.prices import PriceTable

PRICES = PriceTable()


def body(**kw: object) -> dict[str, object]:
    ask = [{"role": "user", "content": "x" * 4000}]
    return {"model": "claude-sonnet-4-5", "messages": ask} | kw


def test_a_request_holds_its_input_and_its_output_cap_at_the_models_prices() -> None:
    got = estimate.reservation_usd(body(max_tokens=100), "claude-sonnet-4-5", PRICES)
    tokens_in = 1000 + estimate.ADDED_TOKENS  # 4000 bytes of text, about 1000 tokens
    assert got == pytest.approx((tokens_in * 3 + 100 * 15) / 1e6, rel=0.02)


@pytest.mark.parametrize(
    ("fields", "output"),
    [
        ({"max_tokens": 32000}, estimate.OUTPUT_TOKENS),  # an agent's usual cap: not all of it
        ({"max_completion_tokens": 10}, 10),
        ({"max_output_tokens": 20}, 20),
        ({}, estimate.OUTPUT_TOKENS),
        ({"max_tokens": True}, estimate.OUTPUT_TOKENS),  # not a number
    ],
)
def test_the_output_held_is_the_requests_cap_up_to_a_ceiling(
    fields: dict[str, object], output: int
) -> None:
    base = estimate.reservation_usd(body(max_tokens=0), "claude-sonnet-4-5", PRICES)
    got = estimate.reservation_usd(body(**fields), "claude-sonnet-4-5", PRICES)
    assert got - base == pytest.approx(output * 15 / 1e6, abs=1e-5)  # the key: a few bytes


def test_a_fixed_reservation_wins_and_an_unpriced_model_holds_nothing() -> None:
    assert estimate.reservation_usd(body(), "claude-sonnet-4-5", PRICES, fixed=0.25) == 0.25
    assert estimate.reservation_usd(body(), "my-local-model", PRICES) == 0.0
