"""Loops on a constructed session: signatures, the two kinds, measured waste, weighting."""

from __future__ import annotations

from ember.learn.loops import (
    apply_loop_weighting,
    call_tokens,
    canonical_signature,
    detect_loops,
)
from ember.learn.model import Recommendation, SessionData, ToolCall


def bash(command: str, *, error: bool = False, out: int = 400) -> ToolCall:
    return ToolCall(
        "Bash",
        {"command": command},
        is_error=error,
        error="No such file" if error else None,
        output_chars=out,
    )


def session(calls: list[ToolCall], sid: str = "s1") -> SessionData:
    s = SessionData("claude", sid, "/logs/s1.jsonl")
    for call in calls:
        s.add_call(call)
    return s


def test_pagination_variants_share_one_signature() -> None:
    variants = [
        "grep -rn foo src | head -50",
        "grep -rn foo src | head -n 100",
        "grep -rn foo src | tail -20",
        "grep -rn foo src --max-count 5",
    ]
    assert len({canonical_signature(bash(v)) for v in variants}) == 1
    reads = [
        ToolCall("Read", {"file_path": "/a/b.py", "offset": 0, "limit": 100}),
        ToolCall("Read", {"file_path": "/a/b.py", "offset": 100, "limit": 100}),
    ]
    assert (
        canonical_signature(reads[0]) == canonical_signature(reads[1]) == "Read: file_path=/a/b.py"
    )


def test_bare_integers_become_n_but_names_with_digits_stay() -> None:
    assert canonical_signature(bash("sleep 5 && curl localhost:8080/v1")) == (
        "Bash: sleep N && curl localhost:8080/v1"
    )
    assert canonical_signature(bash("cat file2.txt")) != canonical_signature(bash("cat file3.txt"))
    codex = ToolCall("shell", {"command": ["bash", "-lc", "sed -n '1,80p' src/app.py"]})
    assert canonical_signature(codex) == "shell: src/app.py"
    assert canonical_signature(bash("git log -5 --oneline")) == "Bash: git log N --oneline"


def test_error_loop_counts_every_call_and_refetch_loop_all_but_the_first() -> None:
    wrong_path = [bash("cat src/confg.py", error=True, out=40) for _ in range(4)]
    refetch = [bash(f"grep -rn TODO . | head -{n}", out=2000) for n in (50, 100, 200)]
    twice = [bash("make test"), bash("make test")]
    loops = detect_loops(session([*wrong_path, *refetch, *twice, bash("ls")]))
    by_kind = {loop.kind: loop for loop in loops}
    assert set(by_kind) == {"error", "refetch"}  # "make test" twice is not a loop

    error = by_kind["error"]
    assert (error.occurrences, error.errors) == (4, 4)
    assert error.wasted_tokens == sum(call_tokens(c) for c in wrong_path)
    assert error.first_error == "No such file"

    fetch = by_kind["refetch"]
    assert fetch.occurrences == 3
    assert fetch.wasted_tokens == sum(call_tokens(c) for c in refetch[1:])
    assert loops[0] is fetch  # the most wasteful first


def test_loops_are_found_per_session() -> None:
    calls = [bash("cat missing.txt", error=True) for _ in range(2)]
    assert detect_loops(session(calls, "a")) == []
    assert detect_loops(session(calls + calls[:1], "b"))[0].occurrences == 3


def test_measured_waste_overrides_the_models_estimate() -> None:
    loops = detect_loops(
        session([bash("cat src/confg.py", error=True, out=4000) for _ in range(5)])
    )
    waste = loops[0].wasted_tokens
    recs = [
        Recommendation("Preferences", "Answer in French.", 50_000),
        Recommendation("Paths", "The config is src/config.py; never cat src/confg.py.", 10),
        Recommendation("Commands", "Run tests with make test.", 300),
    ]
    weighted = apply_loop_weighting(recs, loops)
    guard = next(r for r in weighted if r.section == "Paths")
    assert guard.is_loop_guardrail and guard.estimated_tokens_saved == waste
    assert any("x5" in e for e in guard.evidence)
    others = [r for r in weighted if r.section != "Paths"]
    assert [r.estimated_tokens_saved for r in others] == [50_000, 300]
    assert not any(r.is_loop_guardrail for r in others)
    assert next(r.section for r in weighted) == "Preferences"  # ranked by weight


def test_waste_of_one_signature_adds_up_over_sessions() -> None:
    calls = [bash("cat src/confg.py", error=True) for _ in range(3)]
    loops = detect_loops(session(calls, "a")) + detect_loops(session(calls, "b"))
    (rec,) = apply_loop_weighting([Recommendation("Paths", "Do not cat src/confg.py", 1)], loops)
    assert rec.estimated_tokens_saved == 2 * loops[0].wasted_tokens
