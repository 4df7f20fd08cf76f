"""The comparison's measures on constructed rows: each kept apart, each honest about itself."""

from __future__ import annotations

from typing import Any

import pytest

from ember.config import load_settings
from ember.shadow.compare import (
    PRICE_LABEL,
    SHARED_EVIDENCE_NOTE,
    FactRow,
    Inputs,
    Pointer,
    RunRow,
    Side,
    Target,
    cost_by_path_model_status,
    evidence_quality,
    latency_by_path,
    normalise,
    percentile,
    pointers_of,
    report,
)
from ember.shadow.pairing import (
    LABEL,
    PairingError,
    light_endpoint,
    not_computed,
    parse_pairs,
    semantic_coverage,
)

S = "sess-a"


def fact(
    fid: str,
    side: Side,
    content: str,
    *messages: str,
    session: str = S,
    error: str | None = None,
    kind: str = "user-stated",
) -> FactRow:
    return FactRow(
        fid,
        side,
        f"run-{side}",
        session,
        content,
        tuple(Pointer(kind, m) for m in messages),
        error,
    )


def run(
    side: Side,
    session: str = S,
    *,
    path: str | None = None,
    status: str = "completed",
    model: str | None = "claude-sonnet-4-5",
    usd: float | None = 0.01,
    latency: float | None = 1000.0,
    calls: int = 1,
) -> RunRow:
    return RunRow(
        f"r-{side}-{session}-{status}-{usd}-{latency}",
        side,
        session,
        path or ("steward" if side == "steward" else "hot"),
        model,
        status,
        calls=calls,
        input_tokens=100,
        cache_read_tokens=900,
        output_tokens=50,
        latency_ms=latency,
        estimated_usd=usd,
        price_snapshot="builtin-2026-11",
    )


BOTH = [run("shadow"), run("steward")]
NOT_ASKED = not_computed("not asked for")


def compared(*facts: FactRow, runs: list[RunRow] = BOTH) -> dict[str, Any]:
    return report(Inputs(list(runs), list(facts), {}), NOT_ASKED)


def test_shared_evidence_is_a_neighbour_never_an_exact_match() -> None:
    """The seed's own example: the same message, two wordings of a fact."""
    result = compared(
        fact("f1", "steward", "部署使用独立工作区。", "m1"),
        fact("p1", "shadow", "部署有独立工作区", "m1"),
    )
    exact, evidence = result["exact"], result["evidence"]
    assert exact["steward_covered_by_shadow"] == {"covered": 0, "total": 1, "share": 0.0}
    assert exact["pairs"] == []
    assert evidence["steward_covered_by_shadow"] == {"covered": 1, "total": 1, "share": 1.0}
    assert evidence["note"] == SHARED_EVIDENCE_NOTE
    [neighbour] = evidence["neighbours"]
    assert (neighbour["steward"], neighbour["shadow"]) == ("f1", "p1")
    assert neighbour["shared_messages"] == ["m1"]
    assert neighbour["steward_content"] == "部署使用独立工作区。"


def test_exact_ignores_width_whitespace_and_punctuation_but_not_words() -> None:
    assert normalise("Ｄｅｐｌｏｙ： use a   worktree.") == normalise("Deploy use a worktree")
    assert normalise("部署使用独立工作区。") != normalise("部署有独立工作区")
    result = compared(
        fact("f1", "steward", "Deploy: use a worktree.", "m1"),
        fact("p1", "shadow", "Ｄｅｐｌｏｙ use a worktree", "m2"),
    )
    assert result["exact"]["shadow_covered_by_steward"]["covered"] == 1
    # an exact pair that shares no evidence is no neighbour, and no evidence coverage either
    assert result["evidence"]["steward_covered_by_shadow"]["covered"] == 0


def test_an_exact_pair_with_shared_evidence_is_not_listed_as_a_neighbour() -> None:
    result = compared(
        fact("f1", "steward", "Tabs, not spaces", "m1"),
        fact("p1", "shadow", "Tabs not spaces.", "m1"),
    )
    assert result["evidence"]["steward_covered_by_shadow"]["covered"] == 1
    assert result["evidence"]["neighbours"] == []


def test_the_same_text_in_another_session_covers_nothing() -> None:
    runs = [*BOTH, run("shadow", "sess-b"), run("steward", "sess-b")]
    result = compared(
        fact("f1", "steward", "Tabs, not spaces", "m1"),
        fact("p1", "shadow", "Tabs, not spaces", "m1", session="sess-b"),
        runs=runs,
    )
    assert result["exact"]["steward_covered_by_shadow"]["covered"] == 0
    assert result["evidence"]["steward_covered_by_shadow"]["covered"] == 0


def test_whole_session_pointers_are_not_evidence_overlap() -> None:
    whole = (Pointer("observed-outcome", session_id=S),)
    a = FactRow("f1", "steward", "r", S, "The build is green", whole)
    b = FactRow("p1", "shadow", "r", S, "Deploys take 3 minutes", whole)
    result = compared(a, b)
    assert result["evidence"]["steward_covered_by_shadow"]["covered"] == 0


def test_a_session_only_one_side_ran_is_left_out_of_coverage() -> None:
    runs = [*BOTH, run("shadow", "sess-only-shadow")]
    result = compared(
        fact("f1", "steward", "Tabs", "m1"),
        fact("p1", "shadow", "Tabs", "m1"),
        fact("p2", "shadow", "Uses ruff", "m9", session="sess-only-shadow"),
        runs=runs,
    )
    assert result["scope"]["compared_sessions"] == 1
    assert result["scope"]["sessions_left_out"] == 1
    assert result["exact"]["shadow_covered_by_steward"] == {"covered": 1, "total": 1, "share": 1.0}


def test_invalid_proposals_are_not_coverage() -> None:
    result = compared(
        fact("f1", "steward", "Tabs", "m1"),
        fact("p1", "shadow", "Tabs", "m1", error="evidence m1 belongs to another session"),
    )
    assert result["exact"]["steward_covered_by_shadow"]["covered"] == 0
    assert result["scope"]["shadow_proposals"] == 0


def test_no_facts_is_an_unknown_share_not_zero() -> None:
    assert compared()["exact"]["steward_covered_by_shadow"] == {
        "covered": 0,
        "total": 0,
        "share": None,
    }


def test_cost_is_null_for_a_group_as_soon_as_one_run_has_no_price() -> None:
    cost = cost_by_path_model_status(
        [
            run("shadow", usd=0.01),
            run("shadow", "sess-b", usd=None),  # same path x model x status, no price
            run("shadow", path="cold", model="claude-haiku-4-5", usd=0.002),
            run("steward", usd=0.05),
            run("steward", status="failed", usd=0.03),
        ]
    )
    assert cost["label"] == PRICE_LABEL
    rows = {(r["side"], r["path"], r["model"], r["status"]): r for r in cost["rows"]}
    assert rows[("shadow", "hot", "claude-sonnet-4-5", "completed")]["estimated_usd"] is None
    assert rows[("shadow", "hot", "claude-sonnet-4-5", "completed")]["runs"] == 2
    assert rows[("shadow", "cold", "claude-haiku-4-5", "completed")]["estimated_usd"] == 0.002
    assert rows[("steward", "steward", "claude-sonnet-4-5", "failed")]["estimated_usd"] == 0.03
    assert cost["totals_usd"] == {"shadow": None, "steward": pytest.approx(0.08)}
    assert rows[("steward", "steward", "claude-sonnet-4-5", "completed")]["price_snapshots"] == [
        "builtin-2026-11"
    ]


def test_latency_percentiles_are_nearest_rank_over_completed_runs_with_calls() -> None:
    assert percentile([], 0.5) is None
    values = [float(v) for v in range(1, 21)]
    assert (percentile(values, 0.5), percentile(values, 0.95)) == (10.0, 19.0)
    runs = [run("shadow", latency=v) for v in values]
    runs.append(run("shadow", status="failed", latency=99_999.0))
    runs.append(run("shadow", status="completed", latency=88_888.0, calls=0))
    [row] = latency_by_path(runs)["rows"]
    assert (row["path"], row["runs"], row["p50_ms"], row["p95_ms"]) == ("hot", 20, 10.0, 19.0)


def test_evidence_quality_checks_pointer_identity_per_side() -> None:
    targets = {
        "mu": Target(S, "user"),
        "mt": Target(S, "tool_result"),
        "me": Target(S, "tool_error"),
        "mx": Target("sess-other", "user"),
    }
    facts = [
        fact("p1", "shadow", "ok", "mu"),
        fact("p2", "shadow", "tool", "me", kind="tool-verified"),  # a failed tool result
        fact("p3", "shadow", "points at a tool", "mt"),  # user-stated at a tool result
        fact("p4", "shadow", "elsewhere", "mx"),
        fact("p5", "shadow", "made up", "m-nowhere", error="not in the transcript"),
        FactRow("p6", "shadow", "r", S, "guessed", (Pointer("guessed", "mu"),), "schema"),
        fact("f1", "steward", "verified", "mt", kind="tool-verified"),
    ]
    rows = {r["side"]: r for r in evidence_quality(facts, targets)["rows"]}
    shadow, steward = rows["shadow"], rows["steward"]
    assert (shadow["proposals"], shadow["valid"], shadow["pointers"]) == (6, 4, 6)
    assert (shadow["ok"], shadow["wrong_target"], shadow["other_session"]) == (1, 2, 1)
    assert (shadow["missing_target"], shadow["malformed"], shadow["facts_all_ok"]) == (1, 1, 1)
    assert (steward["ok"], steward["facts_all_ok"]) == (1, 1)


def test_proposed_evidence_is_read_leniently() -> None:
    assert pointers_of('[{"kind": "user-stated", "messageId": "m1"}]') == (
        Pointer("user-stated", "m1"),
    )
    assert pointers_of("not json") == (Pointer(""),)
    assert pointers_of('[7, {"kind": 3, "sessionId": "s"}]') == (
        Pointer(""),
        Pointer("", None, "s"),
    )


# -- semantic pairing --------------------------------------------------------------------------


def test_an_index_out_of_range_is_never_a_pair() -> None:
    assert parse_pairs('```json\n{"pairs": [[0, 1]]}\n```', 1, 2) == [(0, 1)]
    with pytest.raises(PairingError, match="out of range"):
        parse_pairs('```json\n{"pairs": [[0, 2]]}\n```', 1, 2)
    with pytest.raises(PairingError, match="not a pair"):
        parse_pairs('```json\n{"pairs": [[0, true]]}\n```', 1, 2)
    with pytest.raises(PairingError, match="unreadable"):
        parse_pairs("they look the same to me", 1, 2)


class Asker:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, session_id: str, system: str, user: str) -> tuple[str, float | None]:
        self.asked.append((session_id, user))
        return self.answers.pop(0), 0.001


async def test_pairs_are_labelled_reviewable_and_a_one_sided_group_makes_no_call() -> None:
    steward = [fact("f1", "steward", "Deploys use a worktree"), fact("f2", "steward", "Tabs")]
    shadow = [
        fact("p1", "shadow", "Deployment happens from its own worktree"),
        fact("p9", "shadow", "Uses ruff", session="sess-b"),  # the steward had none there
    ]
    ask = Asker('```json\n{"pairs": [[0, 0]]}\n```')
    result = await semantic_coverage(steward, shadow, ask, model="light")
    assert [s for s, _ in ask.asked] == [S]
    assert "A0: Deploys use a worktree" in ask.asked[0][1]
    assert result["computed"] and result["label"] == LABEL == "reviewable pairs, not ground truth"
    assert result["steward_covered_by_shadow"] == {"covered": 1, "total": 2, "share": 0.5}
    assert result["shadow_covered_by_steward"] == {"covered": 1, "total": 2, "share": 0.5}
    assert result["groups_with_one_side"] == 1
    assert result["pairs"][0]["steward"] == "f1" and result["pairs"][0]["shadow"] == "p1"


async def test_a_pairing_that_breaks_its_contract_reports_no_pairs_at_all() -> None:
    steward = [fact("f1", "steward", "Tabs")]
    shadow = [fact("p1", "shadow", "Tabs please")]
    result = await semantic_coverage(
        steward, shadow, Asker('```json\n{"pairs": [[3, 0]]}\n```'), model="light"
    )
    assert result["computed"] is False and "out of range" in result["why"]
    assert "pairs" not in result and result["calls"] == 1


async def test_a_dry_run_makes_no_call() -> None:
    ask = Asker()
    result = await semantic_coverage(
        [fact("f1", "steward", "Tabs")],
        [fact("p1", "shadow", "Tabs")],
        ask,
        model="light",
        dry_run=True,
    )
    assert ask.asked == [] and result["computed"] is False
    assert result["would_call"] == [{"session_id": S, "steward": 1, "shadow": 1}]


def test_the_light_model_needs_a_key_of_its_own(tmp_path: Any) -> None:
    env = {"EMBER_HOME": str(tmp_path)}
    assert light_endpoint(load_settings(env=env)) is None
    anthropic = light_endpoint(load_settings(env={**env, "EMBER_LIGHT_API_KEY": "k1"}))
    assert anthropic is not None and anthropic.model == "claude-haiku-4-5"
    assert ("x-api-key", "k1") in anthropic.headers and anthropic.url.endswith("/v1/messages")
    openai = light_endpoint(
        load_settings(env={**env, "EMBER_LIGHT_API_KEY": "k2", "EMBER_LIGHT_MODEL": "gpt-5-mini"})
    )
    assert openai is not None and openai.url.endswith("/chat/completions")
    assert ("authorization", "Bearer k2") in openai.headers
