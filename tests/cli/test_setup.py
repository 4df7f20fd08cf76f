"""`ember setup claude|codex [--write]` as a user runs it, against a throwaway HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import ember

EMBER = str(Path(sys.executable).with_name("ember"))
SRC = str(Path(ember.__file__).resolve().parents[1])  # this tree, whatever the directory
_DROP = {"CLAUDE_CONFIG_DIR", "CODEX_HOME"}


def _setup(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_") and k not in _DROP}
    env |= {"HOME": str(home), "EMBER_HOME": str(home / ".ember"), "PYTHONPATH": SRC}
    return subprocess.run(
        [EMBER, "setup", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


CODEX_CONFIG = """\
# mine, keep this comment
model = "gpt-5.1"

[analytics]
enabled = false  # privacy
"""


def test_setup_without_write_prints_the_config_and_touches_nothing(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    r = _setup(tmp_path, "codex", "--port", "9100")
    assert r.returncode == 0, r.stderr
    assert str(config) in r.stdout
    assert 'base_url = "http://127.0.0.1:9100/v1"' in r.stdout
    assert '+model_provider = "ember"' in r.stdout  # the change --write would make
    assert config.read_text() == CODEX_CONFIG
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]
    assert not (tmp_path / ".claude").exists()


def test_codex_write_keeps_comments_backs_up_and_a_second_run_changes_nothing(
    tmp_path: Path,
) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    config.chmod(0o600)
    r = _setup(tmp_path, "codex", "--write")
    assert r.returncode == 0, r.stderr
    merged = config.read_text()
    assert merged.startswith(CODEX_CONFIG.split("\n[analytics]")[0])
    assert "enabled = false  # privacy" in merged
    data = tomllib.loads(merged)
    assert data["model_provider"] == "ember"
    assert data["model_providers"]["ember"]["base_url"] == "http://127.0.0.1:8787/v1"
    assert (config.parent / "config.toml.bak").read_text() == CODEX_CONFIG
    assert config.stat().st_mode & 0o777 == 0o600  # a private file stays private
    assert "+[model_providers.ember]" in r.stdout  # the diff is shown

    again = _setup(tmp_path, "codex", "--write")
    assert again.returncode == 0 and "already" in again.stdout
    assert config.read_text() == merged
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml", "config.toml.bak"]


def test_a_later_change_never_overwrites_the_first_backup(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = '{\n  "model": "opus"\n}\n'
    settings.write_text(original)
    assert _setup(tmp_path, "claude", "--write").returncode == 0
    assert _setup(tmp_path, "claude", "--write", "--port", "9200").returncode == 0
    assert (settings.parent / "settings.json.bak").read_text() == original
    assert json.loads((settings.parent / "settings.json.bak.1").read_text())["env"] == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"
    }
    assert json.loads(settings.read_text()) == {
        "model": "opus",
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9200"},
    }


def test_claude_write_creates_a_missing_settings_file(tmp_path: Path) -> None:
    r = _setup(tmp_path, "claude", "--write")
    assert r.returncode == 0, r.stderr
    settings = tmp_path / ".claude" / "settings.json"
    assert json.loads(settings.read_text()) == {
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}
    }
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_a_symlinked_settings_file_is_written_through_not_replaced(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text("{}\n")
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    assert _setup(tmp_path, "claude", "--write").returncode == 0
    assert link.is_symlink()
    assert "ANTHROPIC_BASE_URL" in dotfiles.read_text()


def test_broken_settings_file_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus",}')
    r = _setup(tmp_path, "claude", "--write")
    assert r.returncode == 2
    assert "not valid JSON" in r.stderr and "Traceback" not in r.stderr
    assert settings.read_text() == '{"model": "opus",}'
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_setup_without_a_client_names_the_clients_and_gives_examples(tmp_path: Path) -> None:
    r = _setup(tmp_path)
    assert r.returncode == 2
    assert "Missing argument" not in r.stderr  # click's bare words said neither what nor how
    assert "claude (Claude Code)" in r.stderr and "codex (Codex" in r.stderr
    assert "ember setup claude" in r.stderr and "ember setup codex" in r.stderr
    assert "Usage: ember setup [OPTIONS] {aider|claude|codex|gemini|opencode|qwen}" in r.stderr
    assert not (tmp_path / ".claude").exists() and not (tmp_path / ".codex").exists()


def test_mcp_for_codex_prints_then_writes_its_table_keeping_the_rest(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    shown = _setup(tmp_path, "codex", "--mcp")
    assert shown.returncode == 0, shown.stderr
    assert "[mcp_servers.ember]" in shown.stdout and 'args = ["mcp"]' in shown.stdout
    assert "asks before memory_forget" in shown.stdout
    assert config.read_text() == CODEX_CONFIG
    written = _setup(tmp_path, "codex", "--mcp", "--write")
    assert written.returncode == 0, written.stderr
    merged = config.read_text()
    assert merged.startswith(CODEX_CONFIG) and "enabled = false  # privacy" in merged
    server = tomllib.loads(merged)["mcp_servers"]["ember"]
    assert server["args"][-1] == "mcp" and Path(server["command"]).name in ("ember", "python3")
    assert "model_provider" not in tomllib.loads(merged)  # the proxy's setting is not touched
    again = _setup(tmp_path, "codex", "--mcp", "--write")
    assert again.returncode == 0 and "already starts ember's MCP server" in again.stdout


def test_mcp_for_claude_gives_the_command_and_writes_the_projects_mcp_json(
    tmp_path: Path,
) -> None:
    project = tmp_path / "api"
    project.mkdir()
    shown = _setup(tmp_path, "claude", "--mcp", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "claude mcp add --scope user ember -- " in shown.stdout
    # claude -p refuses every tool it was not told to allow: the note names the four that
    # do not forget, and leaves forgetting to the user's yes
    allowed = shown.stdout.split("--allowedTools ")[1].split("\n")[0].split()
    assert allowed == [f"mcp__ember__memory_{n}" for n in ("search", "save", "update", "list")]
    assert not (project / ".mcp.json").exists()
    written = _setup(tmp_path, "claude", "--mcp", "--write", cwd=project)
    assert written.returncode == 0, written.stderr
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["ember"]
    assert entry["args"][-1] == "mcp"
    assert not (tmp_path / ".claude").exists()  # Claude Code's own files are its own


def test_mcp_takes_no_proxy_options(tmp_path: Path) -> None:
    r = _setup(tmp_path, "codex", "--mcp", "--port", "9100")
    assert r.returncode == 2 and "--mcp needs neither" in r.stderr
