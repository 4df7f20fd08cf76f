"""The pure parts of ``bench/shadow_capture.py``: which facts count as stored, how shadow runs
are tallied, the shares and the summary row. No npm, no client, no process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.bench.conftest import bench_module


@pytest.fixture(scope="module")
def sc() -> Iterator[ModuleType]:
    with bench_module("shadow_capture") as module:
        yield module


def run(path: str = "hot", status: str = "completed", **tokens: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"path": path, "status": status, "calls": 1, "estimated_usd": 0.01}
    row.update(tokens)
    return row


def test_a_fact_counts_only_when_a_memory_holds_its_key_phrase(sc: ModuleType) -> None:
    fly = sc.Fact("Deploys go to fly.io.", "fly.io", "Where do deploys go?")
    assert sc.fact_stored(fly, ["The team deploys to FLY.IO from main."])
    assert not sc.fact_stored(fly, ["Deploys go to heroku.", "fly is a word"])
    assert not sc.fact_stored(fly, [])
    pg = sc.Fact("The database is PostgreSQL 16.", "postgresql 16", "?")
    assert sc.fact_stored(pg, ["Database: PostgreSQL 16"])
    assert not sc.fact_stored(pg, ["Database: PostgreSQL 15"])


def test_scenarios_state_distinct_facts_inside_prompts_that_ask(sc: ModuleType) -> None:
    names = [s.name for s in sc.SCENARIOS]
    assert len(names) == len(set(names)) == 7
    for s in sc.SCENARIOS:
        prompts = s.prompts()
        assert len(prompts) == s.turns
        assert all(p.endswith("?") for p in prompts)  # every prompt also asks something
        for turn, fact in s.placed:
            assert fact.sentence in prompts[turn]
            assert fact.key.lower() in fact.sentence.lower()
        assert len({f.key for f in s.facts}) == len(s.facts)
        expected = 3 if s.name == "claude-continue-proxy" else 2
        assert len(s.facts) == expected
    cont = next(s for s in sc.SCENARIOS if s.name == "claude-continue-proxy")
    assert [t for t, _ in cont.placed] == [0, 2, 4]  # turns 1, 3 and 5


def test_runs_are_tallied_by_path_and_skips_keep_their_reason(sc: ModuleType) -> None:
    runs = [
        run("hot", input_tokens=100, cache_read_tokens=900),
        run("hot", "cancelled", input_tokens=10, cache_read_tokens=90),
        run("cold", "failed", input_tokens=500, output_tokens=20),
        {"path": "hot", "status": "skipped", "reason": "spend cap", "calls": 0},
        {"path": "cold", "status": "skipped", "reason": "spend cap", "calls": 0},
        {"path": "cold", "status": "skipped", "reason": None, "error": "no key", "calls": 0},
    ]
    t = sc.tally_runs(runs)
    assert (t.hot, t.cold, t.skipped, t.failed, t.cancelled) == (2, 1, 3, 1, 1)
    assert t.reasons == {"spend cap": 2, "no key": 1}
    assert t.spend.tokens.input_tokens == 610  # skipped runs made no call
    assert t.spend.tokens.cache_read_tokens == 990
    assert t.spend.usd == pytest.approx(0.03)
    assert sc.cache_read_share(t.spend.tokens) == pytest.approx(990 / 1600)


def test_usd_is_unknown_once_one_call_has_no_price(sc: ModuleType) -> None:
    t = sc.tally_runs([run(input_tokens=1), {**run(input_tokens=1), "estimated_usd": None}])
    assert t.spend.usd is None


def test_spend_share_in_usd_when_priced_else_in_weighted_tokens(sc: ModuleType) -> None:
    client = sc.client_spend(
        [{"input_tokens": 1000, "cache_read_tokens": 0, "output_tokens": 0, "cost_usd": 1.0}]
    )
    shadow = sc.tally_runs([run(input_tokens=10, cache_read_tokens=1000)]).spend
    assert sc.spend_share(shadow, client) == (pytest.approx(0.01), "$")
    unpriced = sc.client_spend([{"input_tokens": 1000, "cost_usd": None}])
    share, basis = sc.spend_share(shadow, unpriced)
    # input-equivalent: 10 + 0.1 * 1000 against 1000
    assert (share, basis) == (pytest.approx(0.11), "t")
    assert sc.spend_share(shadow, sc.client_spend([])) == (None, "t")


def test_the_emulator_log_counts_shadow_questions_and_their_facts(sc: ModuleType) -> None:
    def line(method: str, shadow: str = "none", facts: int = 0) -> str:
        return json.dumps({"method": method, "path": "/v1/x", "shadow": shadow, "facts": facts})

    lines = [
        line("GET"),  # health check or WebSocket handshake: not a model request
        line("POST"),
        line("WEBSOCKET"),
        line("POST", "hot", 2),
        line("WEBSOCKET", "cold", 1),
        "not json",
        "[1, 2]",
    ]
    got = sc.log_counts(lines)
    assert (got.requests, got.websocket, got.hot, got.cold, got.facts) == (4, 2, 1, 1, 3)
    assert got.shadow == 2


def row(
    sc: ModuleType,
    name: str,
    stated: int,
    stored: int,
    runs: list[dict[str, Any]],
    usd: float | None,
    questions: int | None,
) -> Any:
    client = sc.client_spend([{"input_tokens": 10_000, "cost_usd": usd}])
    log = None if questions is None else sc.LogCounts(5, 0, questions, 0, questions)
    return sc.Row(name, stated, stored, sc.tally_runs(runs), client, log, True, False)


def test_the_total_pools_every_share_as_a_ratio_of_sums(sc: ModuleType) -> None:
    a = row(sc, "a", 2, 2, [run(input_tokens=100, cache_read_tokens=900)], 1.0, 1)
    b = row(sc, "b", 3, 0, [run("cold", input_tokens=1000)] * 3, 1.0, 3)
    total = sc.total_row([a, b])
    assert (total.stated, total.stored) == (5, 2)
    assert total.hot_share == pytest.approx(1 / 4)
    assert sc.cache_read_share(total.runs.spend.tokens) == pytest.approx(900 / 4000)
    assert sc.spend_share(total.runs.spend, total.client) == (pytest.approx(0.04 / 2.0), "$")
    assert total.log is not None and total.log.shadow == 4
    assert total.details == {"injected": 2, "facts_injected": 0, "scenarios": 2}
    c = row(sc, "c", 1, 1, [], None, None)  # no price, no request log
    total = sc.total_row([a, c])
    assert total.log is None
    assert sc.spend_share(total.runs.spend, total.client)[1] == "t"


def test_the_table_has_a_row_per_scenario_a_total_and_the_targets(sc: ModuleType) -> None:
    a = row(sc, "claude-x", 2, 2, [run(input_tokens=100, cache_read_tokens=900)], 1.0, 1)
    b = row(sc, "codex-y", 2, 1, [{"path": "hot", "status": "skipped", "reason": "r"}], 1.0, None)
    total = sc.total_row([a, b])
    text = sc.table([a, b], total)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["scenario", "stated", "stored"]
    assert lines[2].split()[:6] == ["claude-x", "2", "2", "100%", "1/0/0", "100%"]
    assert lines[3].split()[:6] == ["codex-y", "2", "1", "50%", "0/0/1", "0%"]
    assert lines[-1].split()[:6] == ["total", "4", "3", "75%", "1/0/1", "50%"]
    assert sc.cells(b)[-2] == "-"  # no request log
    assert sc.cells(a)[-1] == "yes"
    targets = sc.targets(total)
    assert "facts stored >= 90%: 0.750 MISSED" in targets
    assert "shadow calls hot >= 90%: 0.500 MISSED" in targets
    assert "shadow spend <= 0.15 of the client's ($): 0.005 met" in targets


def test_settling_waits_past_the_idle_trigger_then_for_quiet(sc: ModuleType) -> None:
    # settle_state(running, since_start, since_change, reach, quiet, left)
    assert sc.settle_state(False, 80.0, 10.0, 80.0, 10.0, 70.0) == "settled"
    assert sc.settle_state(False, 70.0, 70.0, 80.0, 10.0, 80.0) == "wait"  # idle may fire
    assert sc.settle_state(False, 90.0, 5.0, 80.0, 10.0, 60.0) == "wait"  # a run just ended
    assert sc.settle_state(True, 200.0, 200.0, 80.0, 10.0, 1.0) == "wait"
    assert sc.settle_state(True, 150.0, 10.0, 80.0, 10.0, 0.0) == "deadline"
    assert sc.settle_state(False, 3.0, 3.0, 0.0, 3.0, 147.0) == "settled"  # wrap: proxy gone


def test_scenario_subsets_are_checked(sc: ModuleType) -> None:
    args = sc.parse_args(["--scenarios", "codex-ws-gpt51,claude-print-wrap"])
    assert [s.name for s in args.chosen] == ["claude-print-wrap", "codex-ws-gpt51"]
    with pytest.raises(SystemExit):
        sc.parse_args(["--scenarios", "nope"])
