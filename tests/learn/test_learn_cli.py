"""``ember learn`` end to end: the fixture logs at the agents' default locations, one model
call to the provider emulator, loops weighed, failures reported, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.learn.logs.claude import project_slug
from ember.server import BackgroundServer
from ember.testing import Emulator
from ember.testing.replies import Reply
from tests.learn.conftest import AGENT_LOGS

PROJECT = Path("/work/shop")
ANSWER = {
    "recommendations": [
        {
            "section": "Paths",
            "text": "The settings live in src/settings.py; do not cat src/setings.py.",
            "evidence": "failed cat calls",
            "estimated_tokens_saved": 5,
        },
        {
            "section": "Commands",
            "text": "Run the tests with `make test`.",
            "estimated_tokens_saved": 20,
        },
        {"section": "", "text": "no section: unusable"},
    ]
}


def loop_session(path: Path) -> None:
    """A Claude Code session in PROJECT reading a wrong path four times."""
    lines: list[dict[str, Any]] = [
        {
            "type": "user",
            "sessionId": "loopy",
            "cwd": str(PROJECT),
            "message": {"content": "fix it"},
        }
    ]
    for i in range(4):
        call = {
            "type": "tool_use",
            "id": f"t{i}",
            "name": "Bash",
            "input": {"command": "cat src/setings.py"},
        }
        lines.append(
            {
                "type": "assistant",
                "sessionId": "loopy",
                "message": {"id": f"m{i}", "content": [call]},
            }
        )
        result = {
            "type": "tool_result",
            "tool_use_id": f"t{i}",
            "is_error": True,
            "content": "cat: src/setings.py: No such file or directory",
        }
        lines.append({"type": "user", "sessionId": "loopy", "message": {"content": [result]}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory holding every fixture where its agent writes logs; the current
    directory is the home too (where a run without --project would write)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    claude = home / ".claude" / "projects" / "-tmp"
    shutil.copytree(AGENT_LOGS / "claude-code", claude, ignore=shutil.ignore_patterns("*.json"))
    loop_session(home / ".claude" / "projects" / project_slug(PROJECT) / "loopy.jsonl")
    shutil.copytree(AGENT_LOGS / "codex", home / ".codex" / "sessions" / "2026" / "01" / "02")
    shutil.copytree(AGENT_LOGS / "gemini-cli", home / ".gemini" / "tmp" / "0b7d" / "chats")
    grok = home / ".grok" / "sessions" / "%2Ftmp%2Fproject"
    (grok / "s1").mkdir(parents=True)
    shutil.copy(
        AGENT_LOGS / "grok" / "agent-sessions__grok_chat_history.jsonl",
        grok / "s1" / "chat_history.jsonl",
    )
    shutil.copy(
        AGENT_LOGS / "grok" / "agent-sessions__grok_summary.json", grok / "s1" / "summary.json"
    )
    shutil.copytree(AGENT_LOGS / "grok" / "agent-sessions__grok_subagent", grok / "s2")
    shutil.copytree(
        AGENT_LOGS / "opencode" / "agent-sessions__opencode", home / ".local" / "share" / "opencode"
    )
    for folder in (home / ".codex", home / ".local"):
        for path in folder.rglob("*"):
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return home


def ember_home(home: Path) -> Path:
    """Kept beside the home, so "nothing written" in the home means no file changed."""
    return home.parent / "ember-home"


def invoke(home: Path, *args: str, **env: str) -> Result:
    clean: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("EMBER_", "ANTHROPIC_", "OPENAI_"))
    }
    clean.update({"HOME": str(home), "EMBER_HOME": str(ember_home(home)), **env})
    return CliRunner().invoke(cli, ["learn", *args], env=clean)


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_learn_reads_every_agent_and_asks_the_model_once(home: Path) -> None:
    emu = Emulator()
    emu.script(Reply("Here you go:\n```json\n" + json.dumps(ANSWER) + "\n```"))
    before = files_of(home)
    with BackgroundServer(emu) as server:
        result = invoke(
            home,
            "--llm-url",
            server.url,
            "--model",
            "claude-test",
            "--json",
            ANTHROPIC_API_KEY="sk-test",
        )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)

    assert len(emu.requests) == 1
    request = emu.last_request.json()
    assert request["model"] == "claude-test" and emu.last_request.api_key == "sk-test"
    digest = request["messages"][0]["content"]
    assert digest.index("## Loops") < digest.index("## Sessions")
    assert "`Bash: cat src/setings.py` x4 (4 failed)" in digest

    scan = report["scan"]
    assert scan["sessions"] == 9 + 7 + 3 + 2 + 3 + 1  # every fixture session, and "loopy"
    assert scan["malformed_lines"] == 3
    assert scan["unknown_records"]["frame-link"] == 1
    (loop,) = report["loops"]
    assert (loop["kind"], loop["occurrences"], loop["session_id"]) == ("error", 4, "loopy")

    recs = report["recommendations"]
    assert [r["section"] for r in recs] == ["Paths", "Commands"]  # the measured waste ranks first
    assert (
        recs[0]["is_loop_guardrail"] and recs[0]["estimated_tokens_saved"] == loop["wasted_tokens"]
    )
    assert recs[1] == {**ANSWER["recommendations"][1], "is_loop_guardrail": False, "evidence": []}
    assert report["unusable_recommendations"] == 1
    assert report["model"]["ok"] and report["written"] == []
    assert files_of(home) == before  # dry run: nothing written anywhere


def test_learn_for_one_agent_and_project_in_plain_text(home: Path) -> None:
    emu = Emulator()
    emu.script(Reply(json.dumps(ANSWER)))
    with BackgroundServer(emu) as server:
        result = invoke(
            home,
            "--agent",
            "claude",
            "--project",
            str(PROJECT),
            "--llm-url",
            server.url,
            ANTHROPIC_API_KEY="sk-test",
        )
    assert result.exit_code == 0, result.output
    assert "Scanned 1 sessions" in result.output
    assert "[error] Bash: cat src/setings.py  x4 in claude session loopy" in result.output
    assert "## Paths" in result.output and "[loop guardrail]" in result.output
    assert "Dry run: nothing was written." in result.output
    assert len(emu.requests) == 1


def test_openai_protocol_endpoint(home: Path) -> None:
    emu = Emulator()
    emu.script(Reply(json.dumps({"recommendations": []})))
    with BackgroundServer(emu) as server:
        result = invoke(
            home,
            "--agent",
            "codex",
            "--llm-url",
            server.url + "/v1",
            "--llm-protocol",
            "openai",
            "--model",
            "gpt-test",
            OPENAI_API_KEY="sk-oa",
        )
    assert result.exit_code == 0, result.output
    assert emu.last_request.path == "/v1/chat/completions"
    assert "found nothing worth writing down" in result.output


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply.error(529, "overloaded_error", "Overloaded"), "HTTP 529"),
        (Reply("I could not find anything, sorry."), "no recommendations JSON block"),
    ],
)
def test_a_failed_model_call_is_reported_never_zero_recommendations(
    home: Path, reply: Reply, why: str
) -> None:
    emu = Emulator()
    emu.script(reply)
    with BackgroundServer(emu) as server:
        result = invoke(
            home,
            "--agent",
            "claude",
            "--llm-url",
            server.url,
            "--json",
            ANTHROPIC_API_KEY="sk-test",
        )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["model"]["ok"] is False and why in report["model"]["error"]
    assert report["loops"]  # the scan is still reported
    with BackgroundServer(emu) as server:
        emu.script(reply)
        text = invoke(home, "--agent", "claude", "--llm-url", server.url, ANTHROPIC_API_KEY="k")
    assert text.exit_code == 1
    assert "The analysis failed" in text.output and "No recommendations were made" in text.output


def test_unreachable_endpoint_and_missing_key(home: Path) -> None:
    result = invoke(
        home, "--agent", "claude", "--llm-url", "http://127.0.0.1:9", ANTHROPIC_API_KEY="k"
    )
    assert result.exit_code == 1 and "cannot connect" in result.output
    result = invoke(home, "--agent", "claude", "--llm-url", "http://127.0.0.1:9")
    assert result.exit_code != 0 and "set ANTHROPIC_API_KEY" in str(result.exception)


def test_cli_backend_hang_is_reported(home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(
        f"#!{sys.executable}\nimport time\nprint('{{}}', flush=True)\ntime.sleep(120)\n"
    )
    fake.chmod(0o755)
    result = invoke(
        home,
        "--agent",
        "claude",
        "--cli",
        "claude",
        "--cli-idle-timeout",
        "0.5",
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    )
    assert result.exit_code == 1
    assert "printed nothing for 0.5 s (idle timeout)" in result.output


def test_scan_only_asks_no_model(home: Path) -> None:
    result = invoke(home, "--scan-only", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["model"]["backend"] is None and report["recommendations"] == []


def test_starting_ember_does_not_load_the_learning_pipeline() -> None:
    """`ember proxy` and every other command start without the provider SDKs `ember learn`
    needs (importing them cost ~2 s and ~70 MB, enough to fail start-up health checks)."""
    code = "import sys, ember.cli; print(sorted({'anthropic', 'openai'} & set(sys.modules)))"
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": src},
    )
    assert out.stdout.strip() == "[]"
