from __future__ import annotations

import pytest

from ember.prices import Price, PriceTable
from ember.protocols import adapter_for_path
from ember.protocols.base import Usage


def test_unknown_model_has_no_cost_never_zero() -> None:
    t = PriceTable()
    assert t.cost("some-new-model", Usage(input_tokens=1000)) is None
    assert t.cost(None, Usage(input_tokens=1000)) is None
    assert t.cost("claude-sonnet-4-5", None) is None


def test_no_prefix_guessing() -> None:
    # gpt-5-pro is far dearer than gpt-5: guessing from a prefix would understate the cost.
    assert PriceTable().lookup("gpt-5-pro") is None


def test_dated_model_names_match_their_family() -> None:
    t = PriceTable()
    assert t.lookup("claude-sonnet-4-5-20250929") == t.lookup("claude-sonnet-4-5")
    assert t.lookup("gpt-5-2025-08-07") == t.lookup("gpt-5")


def test_anthropic_cost_prices_each_counter() -> None:
    t = PriceTable({"m": Price(3.0, 15.0, 0.3, 3.75, 6.0)})
    u = Usage(
        input_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=2_000_000,
        cache_write_1h_tokens=1_000_000,
        output_tokens=1_000_000,
    )
    assert t.cost("m", u) == pytest.approx(3.0 + 0.3 + 3.75 + 6.0 + 15.0)


def test_write_price_defaults_to_input_price_when_the_provider_has_none() -> None:
    t = PriceTable({"m": Price(1.0, 2.0, 0.1)})
    assert t.cost("m", Usage(cache_write_tokens=1_000_000)) == pytest.approx(1.0)


def test_negative_prices_are_rejected() -> None:
    with pytest.raises(ValueError):
        Price(-1.0, 1.0, 1.0)


def test_every_model_the_real_clients_send_has_a_price() -> None:
    """Claude Code and Codex as recorded (tests/fixtures/clients), and Claude Code 2.1.197's
    default model for an API key (seen through the proxy without --model): a session on any of
    them is reported, and budgeted, in dollars."""
    from tests.client_fixtures import all_requests

    sent = {
        str(adapter.model(r.json()))  # Gemini names the model in the path, not the body
        for r in all_requests()
        if r.is_model_call and (adapter := adapter_for_path(r.path)) is not None
    }
    table = PriceTable()
    assert {m for m in sent | {"claude-opus-4-8"} if table.lookup(m) is None} == set()


def test_the_docs_give_codexs_default_model_the_price_the_table_has() -> None:
    """README and docs/clients.md state gpt-6.2-sol's price as the built-in table has it (they
    once called it unpriced after the table had priced it)."""
    from pathlib import Path

    price = PriceTable().lookup("gpt-6.2-sol")
    assert price is not None and price.cache_write_5m is not None
    stated = f"${price.input:g} input, ${price.output:g} output, ${price.cache_read:.2f} cache read"
    root = Path(__file__).resolve().parents[1]
    for doc in ("README.md", "docs/clients.md"):
        text = " ".join((root / doc).read_text(encoding="utf-8").split())
        assert stated in text, doc
        assert f"${price.cache_write_5m:.2f} cache write" in text, doc
        assert "no built-in price" not in text and "not in ember's price table" not in text, doc
