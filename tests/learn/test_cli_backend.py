"""The agent-CLI backend: an idle timeout kills a CLI that hangs, a slow but talking one is
left alone, the wall cap still holds, and failures say what happened."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from ember.learn.analyze import AnalysisFailed, CliBackend
from ember.learn.cli_backend import CliFailed, answer_of, run_cli


def fake_cli(tmp_path: Path, name: str, body: str) -> Path:
    """An executable Python script standing in for an agent CLI."""
    path = tmp_path / name
    path.write_text(
        f"#!{sys.executable}\nimport os, sys, time\n"
        f"open({str(tmp_path / (name + '.pid'))!r}, 'w').write(str(os.getpid()))\n{body}\n",
        encoding="utf-8",
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def gone(tmp_path: Path, name: str) -> bool:
    pid = int((tmp_path / f"{name}.pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


HANGS = "print('thinking...', flush=True)\ntime.sleep(120)"


def test_a_cli_that_hangs_is_killed_after_the_idle_timeout(tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "hang", HANGS)
    start = time.monotonic()
    with pytest.raises(CliFailed, match=r"printed nothing for 0.5 s \(idle timeout\)"):
        run_cli([str(cli)], "prompt", idle_timeout=0.5, wall_timeout=60)
    assert time.monotonic() - start < 10
    assert gone(tmp_path, "hang")


def test_a_slow_cli_that_keeps_printing_is_not_idle(tmp_path: Path) -> None:
    body = (
        "prompt = sys.stdin.read()\n"
        "for _ in range(8):\n    print('.', flush=True)\n    time.sleep(0.2)\n"
        "print('ANSWER', len(prompt))"
    )
    cli = fake_cli(tmp_path, "slow", body)
    run = run_cli([str(cli)], "x" * 300_000, idle_timeout=0.6, wall_timeout=30)
    assert run.stdout.strip().endswith("ANSWER 300000")  # a prompt larger than a pipe buffer
    assert run.seconds > 1.2  # longer than the idle timeout in total


def test_the_wall_cap_holds_for_a_cli_that_never_stops_talking(tmp_path: Path) -> None:
    cli = fake_cli(
        tmp_path, "chatty", "while True:\n    print('.', flush=True)\n    time.sleep(0.05)"
    )
    with pytest.raises(CliFailed, match="after the 1 s cap"):
        run_cli([str(cli)], "", idle_timeout=0.5, wall_timeout=1)
    assert gone(tmp_path, "chatty")


def test_exit_status_and_missing_binary_are_reported(tmp_path: Path) -> None:
    cli = fake_cli(
        tmp_path, "fails", "print('Not logged in. Run claude login.', file=sys.stderr)\nsys.exit(3)"
    )
    with pytest.raises(CliFailed, match="exited with status 3: Not logged in"):
        run_cli([str(cli)], "", idle_timeout=5, wall_timeout=10)
    with pytest.raises(CliFailed, match=r"cannot run .*is it installed"):
        run_cli([str(tmp_path / "no-such-cli")], "")


def test_claude_stream_json_answer_is_its_result_event() -> None:
    out = (
        '{"type":"system","subtype":"init"}\n'
        '{"type":"assistant","message":{}}\n'
        '{"type":"result","subtype":"success","is_error":false,'
        '"result":"{\\"recommendations\\": []}"}\n'
    )
    assert answer_of("claude", out) == '{"recommendations": []}'
    with pytest.raises(CliFailed, match="reported an error: Credit balance is too low"):
        answer_of(
            "claude", '{"type":"result","is_error":true,"result":"Credit balance is too low"}'
        )
    with pytest.raises(CliFailed, match="no result event"):
        answer_of("claude", "plain text")
    assert answer_of("codex", "plain text") == "plain text"


def test_backend_turns_a_cli_failure_into_an_analysis_failure(tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "hang2", HANGS)
    backend = CliBackend("claude", idle_timeout=0.3, wall_timeout=30, argv=(str(cli),))
    with pytest.raises(AnalysisFailed, match="idle timeout"):
        backend.complete("system", "digest")
