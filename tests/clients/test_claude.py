from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.clients import claude
from ember.clients.address import ProxyAddress
from ember.errors import ClientError

ADDR = ProxyAddress("127.0.0.1", 8787)


def test_launch_adds_base_url_and_project_header_and_nothing_else() -> None:
    env = {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk"}
    plan = claude.launch("/bin/claude", ["-p", "hi"], ADDR, "/work/api", env)
    assert plan.argv == ["/bin/claude", "-p", "hi"]
    assert plan.env == {
        **env,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787",
        "ANTHROPIC_CUSTOM_HEADERS": "x-ember-cwd: /work/api",
    }
    assert plan.notes == []
    assert env == {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk"}  # the caller's mapping untouched


def test_users_own_custom_headers_survive_and_a_stale_project_line_is_replaced() -> None:
    existing = "X-Gateway-Team: infra\nX-Ember-Cwd: /old/place\n"
    assert claude.custom_headers(existing, "/new") == "X-Gateway-Team: infra\nx-ember-cwd: /new"
    env = {"ANTHROPIC_CUSTOM_HEADERS": "X-Gateway-Team: infra"}
    plan = claude.launch("claude", [], ADDR, "/home/josé/x", env)  # no header for this path
    assert plan.env["ANTHROPIC_CUSTOM_HEADERS"] == "X-Gateway-Team: infra"


def test_replacing_a_gateway_base_url_is_said_out_loud() -> None:
    plan = claude.launch("claude", [], ADDR, None, {"ANTHROPIC_BASE_URL": "https://gw.corp/"})
    assert plan.env["ANTHROPIC_BASE_URL"] == ADDR.origin
    assert "ANTHROPIC_CUSTOM_HEADERS" not in plan.env
    [note] = plan.notes
    assert "https://gw.corp" in note and "EMBER_ANTHROPIC_URL" in note


def test_settings_merge_keeps_every_other_key_order_and_indent() -> None:
    text = '{\n    "model": "opus",\n    "env": {\n        "FOO": "1"\n    },\n    "z": [1]\n}\n'
    merged = claude.merge(text, ADDR)
    data = json.loads(merged)
    assert list(data) == ["model", "env", "z"]
    assert data["env"] == {"FOO": "1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"}
    assert '\n    "model": "opus",' in merged  # the file's 4-space indent kept
    assert claude.merge(merged, ADDR) == merged  # idempotent: same text back


def test_settings_merge_of_a_missing_file_is_just_the_snippet() -> None:
    assert json.loads(claude.merge(None, ADDR)) == json.loads(claude.snippet(ADDR))


@pytest.mark.parametrize(
    ("text", "message"),
    [("{not json", "not valid JSON"), ("[1]", "JSON object"), ('{"env": 3}', '"env"')],
)
def test_unreadable_settings_are_refused_not_overwritten(text: str, message: str) -> None:
    with pytest.raises(ClientError, match=message):
        claude.merge(text, ADDR)


def test_settings_file_follows_claude_config_dir(tmp_path: Path) -> None:
    assert claude.config_path({}, tmp_path) == tmp_path / ".claude" / "settings.json"
    moved = claude.config_path({"CLAUDE_CONFIG_DIR": "/etc/cc"}, tmp_path)
    assert moved == Path("/etc/cc/settings.json")


# -- a settings file that would win over this run's environment (Claude Code 2.1.197) ----------


def test_a_settings_file_env_is_found_with_the_file_that_wins() -> None:
    files = [
        ("user", json.dumps({"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"}})),
        ("project", None),
        ("local", json.dumps({"env": {"ANTHROPIC_CUSTOM_HEADERS": "x-team: blue"}})),
        ("broken", "{not json"),
    ]
    assert claude.configured_env(files) == {
        "ANTHROPIC_BASE_URL": ("http://127.0.0.1:9999", "user"),
        "ANTHROPIC_CUSTOM_HEADERS": ("x-team: blue", "local"),
    }


def test_ember_wins_over_a_settings_file_with_a_settings_flag_and_says_so() -> None:
    """Measured: ~/.claude/settings.json's env.ANTHROPIC_BASE_URL (from an `ember setup` on
    another port) beat the environment, and Claude Code hung on a dead port."""
    configured = {
        "ANTHROPIC_BASE_URL": ("http://127.0.0.1:9999", "~/.claude/settings.json"),
        "ANTHROPIC_CUSTOM_HEADERS": ("x-team: blue", "~/.claude/settings.json"),
    }
    run = claude.launch("claude", ["-p", "hi"], ADDR, "/work/app", {}, configured)
    assert run.argv[:2] == ["claude", "--settings"] and run.argv[3:] == ["-p", "hi"]
    env = json.loads(run.argv[2])["env"]
    assert env["ANTHROPIC_BASE_URL"] == ADDR.origin
    # the file's headers are the ones Claude Code would send: kept, with ember's line
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "x-team: blue\nx-ember-cwd: /work/app"
    assert any("overridden for this run" in n and "9999" in n for n in run.notes)


def test_without_a_settings_file_the_command_line_is_the_users_own() -> None:
    run = claude.launch("claude", ["-p", "hi"], ADDR, "/work/app", {}, {})
    assert run.argv == ["claude", "-p", "hi"]


def test_what_cannot_be_beaten_is_refused_in_one_line_naming_the_file_and_key() -> None:
    managed = {"ANTHROPIC_BASE_URL": ("https://gw.corp", "/etc/claude-code/managed-settings.json")}
    with pytest.raises(ClientError, match=r"managed-settings\.json.*ANTHROPIC_BASE_URL"):
        claude.launch("claude", [], ADDR, "/work/app", {}, {}, managed)
    mine = {"ANTHROPIC_BASE_URL": ("http://127.0.0.1:9999", "~/.claude/settings.json")}
    with pytest.raises(ClientError, match=r"settings\.json.*your own --settings"):
        claude.launch("claude", ["--settings", "x.json"], ADDR, "/work/app", {}, mine)
    ours = {"ANTHROPIC_BASE_URL": (ADDR.origin, "~/.claude/settings.json")}
    run = claude.launch("claude", ["--settings", "x.json"], ADDR, "/work/app", {}, ours)
    assert run.argv[0] == "claude"  # it already points at ember: nothing to refuse


ARGV = ["/opt/ember/bin/ember", "mcp"]


def test_mcp_add_command_registers_ember_for_every_project() -> None:
    assert claude.mcp_add_command(ARGV) == (
        "claude mcp add --scope user ember -- /opt/ember/bin/ember mcp"
    )
    assert claude.mcp_add_command(["/a b/ember", "mcp"]).endswith("-- '/a b/ember' mcp")


def test_mcp_merge_keeps_other_servers_and_a_second_run_changes_nothing() -> None:
    text = '{\n    "mcpServers": {\n        "docs": {"command": "docs-mcp"}\n    }\n}\n'
    merged = claude.mcp_merge(text, ARGV)
    assert json.loads(merged)["mcpServers"] == {
        "docs": {"command": "docs-mcp"},
        "ember": {"command": "/opt/ember/bin/ember", "args": ["mcp"]},
    }
    assert '\n    "mcpServers"' in merged  # the file's own indent
    assert claude.mcp_merge(merged, ARGV) == merged
    assert json.loads(claude.mcp_snippet(ARGV)) == json.loads(claude.mcp_merge(None, ARGV))


def test_mcp_merge_keeps_the_users_own_keys_of_the_entry() -> None:
    text = json.dumps({"mcpServers": {"ember": {"command": "old", "env": {"A": "1"}}}})
    entry = json.loads(claude.mcp_merge(text, ARGV))["mcpServers"]["ember"]
    assert entry == {"command": "/opt/ember/bin/ember", "env": {"A": "1"}, "args": ["mcp"]}
    with pytest.raises(ClientError, match="mcpServers"):
        claude.mcp_merge('{"mcpServers": []}', ARGV)
