"""What a run of tool calls teaches, and what it must not be mistaken for."""

from __future__ import annotations

from ember.memory.models import Evidence
from ember.traffic.patterns import (
    Category,
    ToolRun,
    observe,
    recoveries,
    states_a_preference,
)


def bash(cmd: str, out: str = "ok", error: bool = False, rid: str | None = "m1") -> ToolRun:
    return ToolRun("Bash", {"command": cmd}, out, error, rid)


def test_a_failure_then_a_different_success_is_a_recovery_even_across_requests() -> None:
    earlier = [bash("python -m pytest", "python: command not found", error=True, rid="m1")]
    found = list(recoveries(earlier, [bash("python3 -m pytest", rid="m2")], "s1"))
    assert len(found) == 1
    fact = found[0]
    assert fact.category is Category.ERROR_RECOVERY
    assert (
        "`python -m pytest` fails" in fact.content and "`python3 -m pytest` works" in fact.content
    )
    # the success is the verified evidence; the failure is only an observed outcome
    assert fact.evidence == (
        Evidence("tool-verified", message_id="m2"),
        Evidence("observed-outcome", session_id="s1"),
    )


def test_the_same_call_succeeding_on_retry_is_a_flake_not_a_lesson() -> None:
    runs = [bash("npm test", "ECONNRESET", error=True), bash("npm test", rid="m2")]
    assert list(recoveries([], runs, "s1")) == []


def test_a_tool_that_already_worked_since_the_failure_closes_no_pair() -> None:
    runs = [bash("ls nope", "No such file", error=True), bash("ls"), bash("ls src", rid="m3")]
    found = list(recoveries([], runs, "s1"))
    assert [f.evidence[0].message_id for f in found] == ["m1"]


def test_environment_facts_missing_programs_and_working_build_commands() -> None:
    runs = [
        bash("rg foo", "bash: rg: command not found", error=True, rid="m1"),
        bash("make test 2>&1 | tail -5", "12 passed", rid="m2"),
        bash("echo hi", rid="m3"),
    ]
    facts = {o.key: o for o in observe([], runs, "s1") if o.category is Category.ENVIRONMENT}
    assert set(facts) == {"missing:rg", "works:make test"}
    assert facts["missing:rg"].evidence == (Evidence("observed-outcome", session_id="s1"),)
    assert facts["works:make test"].evidence == (Evidence("tool-verified", message_id="m2"),)


def test_user_corrections_are_preferences_with_the_users_message_as_evidence() -> None:
    text = "Thanks. Please always run ruff before committing. The weather is nice."
    prefs = [o for o in observe([], [], "s1", text, "m9") if o.category is Category.PREFERENCE]
    assert len(prefs) == 1
    assert "always run ruff before committing" in prefs[0].content
    assert prefs[0].evidence == (Evidence("user-stated", message_id="m9"),)


def test_manifests_read_successfully_describe_the_project() -> None:
    runs = [
        ToolRun("Read", {"file_path": "/r/pyproject.toml"}, "[project]", False, "m1"),
        ToolRun("Read", {"file_path": "/r/Cargo.toml"}, "no such file", True, "m2"),
    ]
    arch = [o for o in observe([], runs, "s1") if o.category is Category.ARCHITECTURE]
    assert [o.key for o in arch] == ["manifest:pyproject.toml"]


def test_the_cheap_check_sees_standing_instructions_only() -> None:
    assert states_a_preference("Looks good. Never push to main directly.")
    assert not states_a_preference("What does the cache module do?")


def test_a_lesson_quoting_a_command_with_a_token_keeps_the_lesson_not_the_token() -> None:
    token = "ghp_" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Y"
    failed = f"git push https://x:{token}@github.com/acme/app main"
    earlier = [bash(failed, "fatal: Authentication failed", error=True, rid="m1")]
    [fact] = recoveries(earlier, [bash("gh auth setup-git && git push", rid="m2")], "s1")
    assert token not in fact.content
    assert "git push https://x:[redacted" in fact.content
