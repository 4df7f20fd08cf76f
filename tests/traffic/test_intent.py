"""A lesson is keyed by what the call meant to do, so one lesson never fills two slots."""

from __future__ import annotations

from ember.traffic.intent import describe, intent_key, normalise_command


def test_output_limits_after_a_pipe_are_the_same_intent() -> None:
    a = intent_key("Bash", {"command": "grep -rn foo src | head -50"})
    b = intent_key("Bash", {"command": "grep -rn foo src | head -100"})
    assert a == b == "shell:grep -rn foo src"


def test_volatile_flags_and_redirections_are_stripped() -> None:
    assert normalise_command("pytest -q tests 2>&1 | tail -20") == "pytest -q tests"
    assert normalise_command("grep -A 3 def x.py") == "grep def x.py"
    assert normalise_command("make build && make test") == "make build"


def test_a_file_is_the_same_lesson_through_any_path() -> None:
    assert intent_key("Read", {"file_path": "/repo/src/app.py"}) == intent_key(
        "Read", {"file_path": "src/app.py"}
    )


def test_codex_argv_commands_are_read_as_the_shell_line() -> None:
    key = intent_key("shell", {"command": ["bash", "-lc", "npm test | tail -5"]})
    assert key == "shell:npm test"
    assert describe("shell", {"command": ["bash", "-lc", "npm test"]}) == "npm test"


def test_other_tools_fold_numbers_but_keep_their_arguments_apart() -> None:
    a = intent_key("WebFetch", {"url": "https://x/page/1"})
    assert a == intent_key("WebFetch", {"url": "https://x/page/2"})
    assert a != intent_key("WebFetch", {"url": "https://y/page/1"})
