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
