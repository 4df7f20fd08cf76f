"""The savings ledger on hand-built accounting rows: what compression and shaping saved, what
ember spent on its own, netted per request, session, day and project, at the price each
request billed — and "unknown", never $0, where a price is missing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.prices import PriceTable
from ember.savings import OutputRate, OutputRates
from ember.savings_ledger import DAY, build, window_start

PRICES = PriceTable()
SONNET = "claude-sonnet-4-5"  # $3 input, $15 output, $0.30 cache read, $3.75 cache write (1 M)
T0 = 1_800_000_000.0
RATES = OutputRates(
    {"claude-sonnet": OutputRate(100.0, 40.0, 160.0, "estimated", 50)}, {2: 90}, None
)
NO_RATES = OutputRates({}, {2: 90}, "no baseline: run unshaped for a while")


class Rows:
    """Rows of one project, numbered in order, as ``savings_rows`` reads them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        session: str = "s1",
        *,
        ts: float | None = None,
        origin: str = "client",
        model: str | None = SONNET,
        thread: str | None = None,
        read: int = 0,
        write: int = 0,
        fresh: int = 100,
        output: int = 50,
        cost: float | None = 0.01,
        outcome: str = "ok",
        **notes: Any,
    ) -> dict[str, Any]:
        row = {
            "id": len(self.rows) + 1,
            "ts": T0 + len(self.rows) if ts is None else ts,
            "session_id": session,
            "thread": thread or session,
            "origin": origin,
            "model": model,
            "outcome": outcome,
            "usage_known": 1,
            "input_tokens": fresh,
            "cache_read_tokens": read,
            "cache_write_tokens": write,
            "cache_write_1h_tokens": 0,
            "output_tokens": output,
            "cost_usd": cost,
            "notes": json.dumps(notes) if notes else None,
        }
        self.rows.append(row)
        return row


def test_a_shortened_output_counts_once_written_then_at_the_read_price_on_each_reread() -> None:
    rows = Rows()
    rows.add(write=5_000, compress={"new": 1, "replayed": 0, "saved_new": 10_000})
    for _ in range(3):
        rows.add(read=15_000, compress={"new": 0, "replayed": 1, "saved_replayed": 10_000})
    rows.add(fresh=15_000, compress={"saved_replayed": 10_000})  # the cache had expired
    ledger = build(rows.rows, PRICES, RATES)
    part = ledger.total.to_json()["compression"]
    written, reread, fresh = 10_000 * 3.75e-6, 10_000 * 0.30e-6, 10_000 * 3.0e-6
    assert part["usd"] == pytest.approx(written + 3 * reread + fresh)
    assert part["requests"] == 5 and part["tokens"] == 50_000 and part["label"] == "estimated"
    assert ledger.total.net == pytest.approx(written + 3 * reread + fresh)
    per_request = build(rows.rows, PRICES, RATES, per_request=True).requests
    assert per_request[2].brief()["parts"]["compression"] == pytest.approx(reread)


def test_a_memory_block_is_paid_on_its_ask_and_on_every_later_request_of_its_conversation() -> None:
    rows = Rows()
    rows.add(write=2_000, memory={"injected": 3, "bytes": 900, "busy": False})
    for _ in range(4):
        rows.add(read=3_000)
    rows.add(thread="s1/title", read=0)  # a side request never carries the block
    rows.add(outcome="upstream_error", fresh=0, cost=0.0)  # billed nothing, read nothing
    rows.add("s2", read=3_000)  # another session
    part = build(rows.rows, PRICES, NO_RATES).total.to_json()["memory_blocks"]
    tokens = 900 / 3  # ember's estimator counts 3 bytes a token on rendered blocks
    assert part["blocks_written"] == 1 and part["rereads"] == 4
    # fresh on its ask (after the client's breakpoint), read on each later request
    assert part["usd"] == pytest.approx(tokens * 3.0e-6 + 4 * tokens * 0.30e-6)
    assert part["label"] == "estimated"


def test_a_second_ask_adds_its_block_to_what_the_conversation_carries() -> None:
    rows = Rows()
    rows.add(write=2_000, memory={"bytes": 300})
    rows.add(read=2_000, write=500, memory={"bytes": 300})
    rows.add(read=3_000)
    part = build(rows.rows, PRICES, NO_RATES).total.part("memory_blocks")
    assert part.blocks == 2 and part.rereads == 2 and part.requests == 3
    # fresh on its ask; written by the next request (its breakpoint moved past it); then read
    first = 100 * 3.0e-6 + 100 * 3.75e-6 + 100 * 0.30e-6
    second = 100 * 3.0e-6 + 100 * 0.30e-6
    assert part.usd == pytest.approx(first + second)


def test_ember_s_own_calls_are_spent_at_their_billed_cost_and_netted() -> None:
    rows = Rows()
    rows.add(write=5_000, compress={"saved_new": 20_000})
    rows.add(origin="shadow", read=5_000, cost=0.004)
    rows.add(origin="owned_tools", read=5_000, cost=0.002)
    rows.add(origin="steward", cost=0.001)
    total = build(rows.rows, PRICES, NO_RATES).total
    doc = total.to_json()
    assert doc["shadow"] == pytest.approx(doc["shadow"] | {"usd": 0.004, "label": "billed"})
    assert doc["retrievals"]["usd"] == pytest.approx(0.002)
    assert doc["steward"]["usd"] == pytest.approx(0.001)
    assert doc["spent_usd"] == pytest.approx(0.007)
    assert doc["net_usd"] == pytest.approx(20_000 * 3.75e-6 - 0.007)


def test_an_unknown_price_makes_its_part_and_the_net_unknown_never_zero() -> None:
    rows = Rows()
    rows.add(write=5_000, compress={"saved_new": 20_000})
    rows.add("s2", model="acme-internal-70b", write=5_000, compress={"saved_new": 1_000})
    rows.add(origin="shadow", model="acme-internal-70b", cost=None)
    doc = build(rows.rows, PRICES, NO_RATES).to_json()
    assert doc["net_usd"] is None and doc["saved_usd"] is None and doc["spent_usd"] is None
    assert doc["compression"]["usd"] is None and doc["compression"]["unpriced_requests"] == 1
    assert doc["compression"]["priced_usd"] == pytest.approx(20_000 * 3.75e-6)
    assert doc["shadow"]["usd"] is None and doc["unpriced_requests"] == 2


def test_shaping_saves_its_rate_per_shaped_request_at_the_models_output_price() -> None:
    rows = Rows()
    shaped = {"arm": "treatment", "level": 2, "block": True, "effort": []}
    for _ in range(3):
        rows.add(read=1_000, shaping=shaped)
    rows.add(model="gpt-5", read=1_000, shaping=shaped)  # a family without an estimate
    rows.add("s2", read=1_000, shaping={"arm": "control", "level": None, "block": False})
    doc = build(rows.rows, PRICES, RATES).to_json()
    part = doc["shaping"]
    assert part["usd"] == pytest.approx(3 * 100 * 15e-6)
    assert part["low_usd"] == pytest.approx(3 * 40 * 15e-6)
    assert part["high_usd"] == pytest.approx(3 * 160 * 15e-6)
    assert part["label"] == "estimated" and part["requests"] == 4
    assert part["requests_without_estimate"] == 1
    assert "output_holdout" in doc["why"]["shaping"]  # how to get a measurement


def test_a_measured_rate_is_labelled_measured() -> None:
    rows = Rows()
    rows.add(read=1_000, shaping={"arm": "treatment", "level": 2, "block": False})
    rates = OutputRates({"claude-sonnet": OutputRate(80.0, 10.0, 150.0, "measured", 40)})
    doc = build(rows.rows, PRICES, rates).to_json()
    assert doc["shaping"]["label"] == "measured" and "shaping" not in doc["why"]


def test_a_tool_definition_ember_adds_is_written_once_then_re_read() -> None:
    rows = Rows()
    rows.add(write=3_000, compress={"tool_tokens": 250})
    rows.add(read=3_000, compress={"tool_tokens": 250})
    rows.add(thread="s1/sub-agent", write=2_000, compress={"tool_tokens": 250})
    part = build(rows.rows, PRICES, NO_RATES).total.part("tool_definitions")
    assert part.blocks == 2 and part.rereads == 1  # each conversation writes its own prefix
    assert part.usd == pytest.approx(2 * 250 * 3.75e-6 + 250 * 0.30e-6)


def test_the_verbosity_block_is_written_once_per_conversation_then_re_read() -> None:
    rows = Rows()
    shaped = {"arm": "treatment", "level": 2, "block": True}
    rows.add(write=3_000, shaping=shaped)
    rows.add(read=3_000, shaping=shaped)
    rows.add(read=3_000, shaping=shaped)
    part = build(rows.rows, PRICES, NO_RATES).total.part("verbosity_block")
    assert part.blocks == 1 and part.requests - part.blocks == 2
    assert part.usd == pytest.approx(90 * 3.75e-6 + 2 * 90 * 0.30e-6)


def test_without_an_estimate_shaping_says_why_and_the_net_still_stands() -> None:
    rows = Rows()
    rows.add(write=1_000, shaping={"arm": "treatment", "level": 2, "block": False})
    doc = build(rows.rows, PRICES, NO_RATES).to_json()
    assert doc["shaping"]["usd"] == 0 and doc["shaping"]["requests_without_estimate"] == 1
    assert doc["why"]["shaping"] == NO_RATES.why
    assert doc["why"]["compression"].startswith("no compression yet")
    assert doc["net_usd"] == pytest.approx(0.0)


def test_a_window_counts_re_reads_inside_it_of_blocks_written_before_it() -> None:
    rows = Rows()
    rows.add(ts=T0, write=2_000, memory={"bytes": 300})
    rows.add(ts=T0 + 2 * DAY, read=2_000)
    rows.add(ts=T0 + 2 * DAY + 1, read=2_000)
    since = window_start(1, now=T0 + 2 * DAY + 5)
    ledger = build(rows.rows, PRICES, NO_RATES, since)
    part = ledger.total.part("memory_blocks")
    assert part.blocks == 0 and part.requests == 2 and part.rereads == 2
    assert part.usd == pytest.approx(2 * 100 * 0.30e-6)
    [day] = ledger.days_json()
    assert day["ts"] == since and day["spent_usd"] == pytest.approx(part.usd)


def test_days_and_sessions_add_up_to_the_total() -> None:
    rows = Rows()
    rows.add("a", ts=T0, write=5_000, compress={"saved_new": 1_000})
    rows.add("b", ts=T0 + DAY, write=5_000, compress={"saved_new": 3_000})
    rows.add("b", ts=T0 + DAY + 1, origin="shadow", cost=0.001)
    ledger = build(rows.rows, PRICES, NO_RATES)
    days = ledger.days_json()
    sessions = ledger.sessions_json()
    assert [s["session_id"] for s in sessions] == ["b", "a"]  # latest first
    total = ledger.total.net
    assert total is not None
    assert sum(d["net_usd"] for d in days) == pytest.approx(total)
    assert sum(s["net_usd"] for s in sessions) == pytest.approx(total)
    filled = ledger.days_json(int(T0 // DAY) - 1, 4)
    assert [d["net_usd"] for d in filled] == [0, days[0]["net_usd"], days[1]["net_usd"], 0]


def test_no_request_at_all_is_explained() -> None:
    doc = build([], PRICES, NO_RATES).to_json()
    assert doc["net_usd"] == 0 and "point a client at the proxy" in doc["why"]["all"]


def test_output_rates_parse_the_views_document_and_refuse_a_bad_one() -> None:
    rates = OutputRates.from_json(
        {
            "families": {"gpt-5": {"tokens_per_request": 12.5, "low": None, "high": 30,
                                   "label": "measured", "requests": 9}},
            "block_tokens": {"2": 93},
            "why": None,
        }
    )  # fmt: skip
    assert rates.families["gpt-5"] == OutputRate(12.5, None, 30.0, "measured", 9)
    assert rates.block_tokens == {2: 93}
    with pytest.raises(ValueError, match="gpt-5"):
        OutputRates.from_json({"families": {"gpt-5": {"tokens_per_request": "many"}}})


def test_a_week_out_of_a_month_is_its_days_and_their_requests() -> None:
    rows = Rows()
    rows.add("old", ts=T0, write=5_000, compress={"saved_new": 1_000})
    rows.add("new", ts=T0 + 10 * DAY, write=5_000, compress={"saved_new": 2_000})
    today = int((T0 + 10 * DAY) // DAY)
    month = build(rows.rows, PRICES, NO_RATES, window_start(30, now=T0 + 10 * DAY))
    week = month.span(today - 6, today)
    assert week.client_requests == 1 and month.client_requests == 2
    assert week.total.net == pytest.approx(2_000 * 3.75e-6)
    assert month.total.net == pytest.approx(3_000 * 3.75e-6)
    assert "compression" not in week.why()
