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
from tests.learn.conftest import AGENT_LOGS, needs_agent_logs

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
    if not AGENT_LOGS.is_dir():
        pytest.skip(needs_agent_logs.kwargs["reason"])
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


# --- write-back: dry run, --apply, idempotence -----------------------------------------------

USER_NOTES = "# My own notes\n\nKeep me exactly as I am.\n"


def learn_once(home: Path, answer: dict[str, Any], *args: str) -> tuple[Result, Emulator]:
    """One `ember learn` run against a fresh emulator answering ``answer``."""
    emu = Emulator()
    emu.script(Reply("```json\n" + json.dumps(answer) + "\n```"))
    with BackgroundServer(emu) as server:
        result = invoke(
            home, "--llm-url", server.url, "--model", "claude-sonnet-4-5", *args,
            ANTHROPIC_API_KEY="sk-test",
        )  # fmt: skip
    return result, emu


@pytest.fixture
def repo(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree with the user's own CLAUDE.local.md, the current directory."""
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").write_text("# git ls-files --others --exclude-from\n")
    (repo / "CLAUDE.local.md").write_text(USER_NOTES)
    monkeypatch.chdir(repo)
    return repo


def test_dry_run_prints_the_diff_and_writes_nothing(home: Path, repo: Path) -> None:
    before = files_of(repo)
    result, emu = learn_once(home, ANSWER, "--agent", "claude")
    assert result.exit_code == 0, result.output
    assert len(emu.requests) == 1
    assert f"--- would write {repo / 'CLAUDE.local.md'} (new Paths, Commands)" in result.output
    assert "+<!-- ember:learn:start -->" in result.output
    assert "+- The settings live in src/settings.py" in result.output
    assert "+/CLAUDE.local.md" in result.output  # the exclude line it would add
    assert "Dry run: nothing was written. Run again with --apply" in result.output
    assert "sessions of every project were read" in result.output
    assert files_of(repo) == before


def test_apply_writes_the_block_and_a_second_apply_changes_nothing(home: Path, repo: Path) -> None:
    result, emu = learn_once(home, ANSWER, "--agent", "claude", "--apply")
    assert result.exit_code == 0, result.output
    assert len(emu.requests) == 1
    local = (repo / "CLAUDE.local.md").read_text()
    assert local.startswith(USER_NOTES)  # the user's text, untouched
    start, end = local.index("<!-- ember:learn:start -->"), local.index("<!-- ember:learn:end -->")
    block = local[start:end]
    assert "### Paths\n\n- The settings live in src/settings.py" in block
    assert "### Commands\n\n- Run the tests with `make test`." in block
    assert local[end:].strip() == "<!-- ember:learn:end -->"
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.startswith("# git ls-files") and "\n/CLAUDE.local.md\n" in exclude
    assert f"Written:\n  {repo / 'CLAUDE.local.md'}\n  {repo / '.git/info/exclude'}" in (
        result.output
    )
    assert not (repo / "AGENTS.md").exists() and not (repo / "CLAUDE.md").exists()

    snapshot = files_of(repo)
    again, emu = learn_once(home, ANSWER, "--agent", "claude", "--apply", "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.output)
    assert report["written"] == [] and report["planned"][0]["files"] == []
    assert report["planned"][0]["replaced_sections"] == ["Paths", "Commands"]
    assert files_of(repo) == snapshot  # idempotent, byte for byte
    assert len(emu.requests) == 1
    digest = emu.last_request.json()["messages"][0]["content"]
    learned = digest[digest.index("## Previously learned patterns") :]
    assert "### Paths\n- The settings live in src/settings.py" in learned


def test_a_section_not_reemitted_is_kept(home: Path, repo: Path) -> None:
    assert learn_once(home, ANSWER, "--agent", "claude", "--apply")[0].exit_code == 0
    later = {"recommendations": [{"section": "Commands", "text": "Use `make check`."}]}
    result, _ = learn_once(home, later, "--agent", "claude", "--apply")
    assert result.exit_code == 0, result.output
    local = (repo / "CLAUDE.local.md").read_text()
    assert "src/settings.py" in local  # Paths kept
    assert "Use `make check`." in local and "make test" not in local  # Commands replaced
    assert local.startswith(USER_NOTES)


def test_every_agent_read_gets_its_own_file_once(home: Path, repo: Path) -> None:
    result, _ = learn_once(home, ANSWER, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["scan"]["sessions_by_agent"] == {
        "claude": 10, "codex": 7, "gemini": 3, "grok": 2, "opencode": 3,
    }  # fmt: skip
    targets = [p["target"] for p in report["planned"]]
    assert targets == [str(repo / n) for n in ("CLAUDE.local.md", "AGENTS.md", "GEMINI.md")]
    assert report["written"] == []


def test_target_writes_only_that_file(home: Path, repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "notes" / "LESSONS.md"
    before = files_of(repo)
    result, _ = learn_once(home, ANSWER, "--target", str(target), "--apply", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["written"] == [str(target)]
    assert "<!-- ember:learn:start -->" in target.read_text()
    assert files_of(repo) == before


def test_scan_only_refuses_to_apply(home: Path) -> None:
    result = invoke(home, "--scan-only", "--apply")
    assert result.exit_code != 0 and "nothing to write" in str(result.exception)


# --- the model call's spend -------------------------------------------------------------------


def test_the_learn_call_is_accounted_apart_from_user_sessions(home: Path, repo: Path) -> None:
    from ember.prices import PriceTable
    from ember.protocols.base import Usage
    from ember.store.accounting import exchanges, session_totals

    result, _ = learn_once(home, ANSWER, "--agent", "claude")
    assert result.exit_code == 0, result.output
    db = ember_home(home) / "stats.db"
    (row,) = exchanges(db)
    assert (row["origin"], row["thread_kind"], row["model"]) == (
        "learn",
        "learn",
        "claude-sonnet-4-5",
    )
    assert row["session_id"].startswith("learn-") and row["status"] == 200
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0 and row["usage_known"] == 1
    usage = Usage(row["input_tokens"], row["cache_read_tokens"], row["cache_write_tokens"], 0,
                  row["output_tokens"])  # fmt: skip
    assert row["cost_usd"] == pytest.approx(PriceTable().cost("claude-sonnet-4-5", usage))
    assert row["cost_usd"] > 0
    assert session_totals(db) == []  # never folded into a user's session
    stats = CliRunner().invoke(
        cli, ["stats", "--json"], env={"EMBER_HOME": str(ember_home(home)), "EMBER_CONFIG": ""}
    )
    assert stats.exit_code == 0, stats.output
    shown = json.loads(stats.output)
    assert shown["sessions"] == []
    [spend] = shown["ember_spend"]  # listed apart, by origin
    assert (spend["origin"], spend["requests"]) == ("learn", 1)
    assert spend["cost_usd"] == pytest.approx(row["cost_usd"])
    table = CliRunner().invoke(
        cli, ["stats"], env={"EMBER_HOME": str(ember_home(home)), "EMBER_CONFIG": ""}
    )
    assert "No sessions recorded" in table.output and "learn" in table.output


def test_a_refused_call_records_no_spend(home: Path) -> None:
    emu = Emulator()
    emu.script(Reply.error(529, "overloaded_error", "Overloaded"))
    with BackgroundServer(emu) as server:
        result = invoke(home, "--agent", "claude", "--llm-url", server.url, ANTHROPIC_API_KEY="k")
    assert result.exit_code == 1
    assert not (ember_home(home) / "stats.db").exists()
