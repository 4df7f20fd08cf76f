"""`ember setup opencode|gemini|qwen|aider [--write]` as a user runs it, against a throwaway
HOME: each client's own file merged with its comments kept, a backup, nothing on a second run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.clients import jsonc
from tests.cli.test_setup import _setup

OPENCODE = """\
{
  // my OpenCode settings
  "theme": "opencode",
  "provider": {"anthropic": {"options": {"timeout": 60000}}},
}
"""


def test_opencode_write_keeps_comments_backs_up_and_a_second_run_changes_nothing(
    tmp_path: Path,
) -> None:
    config = tmp_path / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(OPENCODE)
    shown = _setup(tmp_path, "opencode", "--port", "9100")
    assert shown.returncode == 0, shown.stderr
    assert '"baseURL": "http://127.0.0.1:9100/v1"' in shown.stdout
    assert config.read_text() == OPENCODE  # without --write nothing is written
    r = _setup(tmp_path, "opencode", "--write")
    assert r.returncode == 0, r.stderr
    merged = config.read_text()
    assert "// my OpenCode settings" in merged and '"theme": "opencode",' in merged
    options = jsonc.loads(merged, "f")["provider"]["anthropic"]["options"]
    assert options == {"timeout": 60000, "baseURL": "http://127.0.0.1:8787/v1"}
    assert (config.parent / "opencode.json.bak").read_text() == OPENCODE
    again = _setup(tmp_path, "opencode", "--write")
    assert again.returncode == 0 and "already sends OpenCode through ember" in again.stdout


def test_gemini_write_selects_the_api_key_and_writes_the_base_url_to_its_env_file(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n  // mine\n  "ui": {"theme": "GitHub"}\n}\n')
    r = _setup(tmp_path, "gemini", "--write")
    assert r.returncode == 0, r.stderr
    assert "// mine" in settings.read_text()
    auth = jsonc.loads(settings.read_text(), "f")["security"]["auth"]
    assert auth == {"selectedType": "gemini-api-key"}
    env_file = tmp_path / ".gemini" / ".env"
    assert env_file.read_text() == "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787\n"
    assert "only in a trusted folder without a .env of its own" in r.stdout
    again = _setup(tmp_path, "gemini", "--write")
    assert again.stdout.count("already sends Gemini CLI through ember") == 2


def test_gemini_signed_in_with_google_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    text = '{"security": {"auth": {"selectedType": "oauth-personal"}}}'
    settings.write_text(text)
    r = _setup(tmp_path, "gemini", "--write")
    assert r.returncode != 0 and "oauth-personal" in r.stderr
    assert settings.read_text() == text


@pytest.mark.parametrize(
    ("client", "path", "expected"),
    [
        ("qwen", ".qwen/settings.json", '"baseUrl": "http://127.0.0.1:8787/v1"'),
        ("aider", ".aider.conf.yml", "  - OPENAI_BASE_URL=http://127.0.0.1:8787/v1\n"),
    ],
)
def test_qwen_and_aider_write_their_file_once(
    tmp_path: Path, client: str, path: str, expected: str
) -> None:
    r = _setup(tmp_path, client, "--write")
    assert r.returncode == 0, r.stderr
    assert expected in (tmp_path / path).read_text()
    again = _setup(tmp_path, client, "--write")
    assert again.returncode == 0 and "already sends" in again.stdout


def test_aider_is_told_its_requests_name_no_project(tmp_path: Path) -> None:
    r = _setup(tmp_path, "aider")
    assert "name no project directory" in r.stdout and "ember wrap aider" in r.stdout


def test_mcp_is_for_the_clients_that_start_ember_mcp(tmp_path: Path) -> None:
    r = _setup(tmp_path, "opencode", "--mcp")
    assert r.returncode == 2 and "--mcp is for claude and codex" in r.stderr
