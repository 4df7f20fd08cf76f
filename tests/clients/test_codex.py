from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ember.clients import codex
from ember.clients.address import ProxyAddress
from ember.errors import ClientError
from tests.cli.fake_agent import codex_config

ADDR = ProxyAddress("127.0.0.1", 8787)
KEY = {"OPENAI_API_KEY": "sk-test"}


def test_overrides_parse_as_toml_into_the_ember_provider_before_the_users_args() -> None:
    plan = codex.launch("/bin/codex", ["exec", "say hi"], ADDR, '/w/"q" dir', KEY)
    assert plan.argv[0] == "/bin/codex" and plan.argv[-2:] == ["exec", "say hi"]
    assert plan.argv[1::2][:-1] == ["-c"] * 7
    assert codex_config(plan.argv) == {
        "model_provider": "ember",
        "model_providers": {
            "ember": {
                "name": "Ember",
                "base_url": "http://127.0.0.1:8787/v1",
                "env_key": "OPENAI_API_KEY",
                "wire_api": "responses",
                "supports_websockets": codex.SUPPORTS_WEBSOCKETS,
                "http_headers": {"x-ember-cwd": '/w/"q" dir'},
            }
        },
    }
    assert plan.env == KEY


@pytest.mark.parametrize("moved", [["-C", "/elsewhere"], ["--cd=/x"], ["-C/x"], ["--cd", "/x"]])
def test_no_project_header_when_codex_is_sent_to_another_directory(moved: list[str]) -> None:
    plan = codex.launch("codex", moved, ADDR, "/w", KEY)
    assert "http_headers" not in codex_config(plan.argv)["model_providers"]["ember"]


def test_missing_api_key_variable_is_refused_before_codex_starts() -> None:
    with pytest.raises(ClientError, match=r"\$OPENAI_API_KEY, which is not set"):
        codex.launch("codex", [], ADDR, "/w", {})
    plan = codex.launch("codex", [], ADDR, "/w", {"MY_KEY": "sk"}, env_key="MY_KEY")
    assert codex_config(plan.argv)["model_providers"]["ember"]["env_key"] == "MY_KEY"
    with pytest.raises(ClientError, match="not an environment variable name"):
        codex.check_env_key("MY KEY=1")


USER_CONFIG = """\
# my codex settings
model = "gpt-5.1"   # the one I like
model_provider = "openai"

[analytics]
enabled = false  # privacy

[model_providers.ember]
stream_idle_timeout_ms = 900000  # slow network

[model_providers.other]
name = "Other"
"""


def test_config_merge_keeps_comments_and_other_tables_and_selects_ember() -> None:
    merged = codex.merge(USER_CONFIG, ADDR)
    for line in USER_CONFIG.splitlines():
        if line != 'model_provider = "openai"':
            assert line in merged  # every other line kept, comments included
    data = tomllib.loads(merged)
    assert data["model_provider"] == "ember"
    assert data["model_providers"]["ember"] == {
        "stream_idle_timeout_ms": 900000,
        **codex.provider(ADDR),
    }
    assert data["model_providers"]["other"] == {"name": "Other"}
    assert codex.merge(merged, ADDR) == merged  # idempotent


def test_config_merge_into_nothing_is_the_snippet() -> None:
    text = codex.merge(None, ADDR)
    assert text == codex.snippet(ADDR)
    assert tomllib.loads(text) == {
        "model_provider": "ember",
        "model_providers": {"ember": codex.provider(ADDR)},
    }


@pytest.mark.parametrize(
    "text",
    [
        'model_providers.ember.base_url = "http://old/v1"\n',
        'model_providers = { other = { name = "O" } }\n',
    ],
)
def test_config_merge_handles_dotted_keys_and_inline_tables(text: str) -> None:
    data = tomllib.loads(codex.merge(text, ADDR))
    assert data["model_provider"] == "ember"
    assert data["model_providers"]["ember"]["base_url"] == "http://127.0.0.1:8787/v1"


@pytest.mark.parametrize(
    ("text", "message"),
    [("model = [", "not valid TOML"), ("model_providers = 3\n", "not a table")],
)
def test_unreadable_config_is_refused_not_overwritten(text: str, message: str) -> None:
    with pytest.raises(ClientError, match=message):
        codex.merge(text, ADDR)


def test_config_file_follows_codex_home(tmp_path: Path) -> None:
    assert codex.config_path({}, tmp_path) == tmp_path / ".codex" / "config.toml"
    assert codex.config_path({"CODEX_HOME": "/c"}, tmp_path) == Path("/c/config.toml")


ARGV = ["/opt/ember/bin/ember", "mcp"]


def test_mcp_merge_adds_the_server_and_keeps_everything_else() -> None:
    text = (
        "# mine\n"
        'model = "gpt-5.1"\n\n'
        "[mcp_servers.docs]\n"
        'command = "docs-mcp"\n\n'
        "[mcp_servers.ember]\n"
        "startup_timeout_sec = 20  # slow disk\n"
    )
    merged = codex.mcp_merge(text, ARGV)
    assert merged.startswith('# mine\nmodel = "gpt-5.1"\n')
    assert "startup_timeout_sec = 20  # slow disk" in merged
    data = tomllib.loads(merged)
    assert data["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert data["mcp_servers"]["ember"] == {
        "startup_timeout_sec": 20,
        "command": "/opt/ember/bin/ember",
        "args": ["mcp"],
        # Codex hands a server none of these unless told, and runs a turn without the tools of
        # an optional server still starting after a second (both seen with Codex 0.171)
        "env_vars": ["EMBER_HOME", "EMBER_CONFIG"],
        "required": True,
    }
    assert codex.mcp_merge(merged, ARGV) == merged  # a second run changes nothing
    assert "model_provider" not in data  # the proxy's provider is another setting


def test_mcp_snippet_is_the_table_alone() -> None:
    assert tomllib.loads(codex.mcp_snippet(ARGV)) == {
        "mcp_servers": {
            "ember": {
                "command": "/opt/ember/bin/ember",
                "args": ["mcp"],
                "env_vars": ["EMBER_HOME", "EMBER_CONFIG"],
                "required": True,
            }
        }
    }


def test_mcp_merge_refuses_what_it_cannot_merge() -> None:
    with pytest.raises(ClientError, match="mcp_servers is not a table"):
        codex.mcp_merge("mcp_servers = 1\n", ARGV)
    with pytest.raises(ClientError, match="not valid TOML"):
        codex.mcp_merge("[mcp_servers", ARGV)
