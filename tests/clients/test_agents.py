"""How OpenCode, Gemini CLI, Qwen Code and aider are pointed at ember (pure): what one run gets,
and what the lasting configuration merges into their own files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.clients import aider, gemini, jsonc, opencode, qwen
from ember.clients.address import ProxyAddress
from ember.errors import ClientError

ADDR = ProxyAddress("127.0.0.1", 8787)


def test_opencode_run_points_both_served_providers_and_merges_a_users_own_content() -> None:
    theirs = {"provider": {"openai": {"options": {"baseURL": "https://gw/v1", "x": 1}}}, "y": 2}
    plan = opencode.launch(
        "oc", ["run", "hi"], ADDR, "/w/p", {"OPENCODE_CONFIG_CONTENT": json.dumps(theirs)}
    )
    config = json.loads(plan.env["OPENCODE_CONFIG_CONTENT"])
    assert config["y"] == 2 and config["provider"]["openai"]["options"]["x"] == 1
    for provider in ("anthropic", "openai"):
        options = config["provider"][provider]["options"]
        assert options["baseURL"] == "http://127.0.0.1:8787/v1"
        assert options["headers"] == {"x-ember-cwd": "/w/p"}
    assert plan.notes == [
        "OPENCODE_CONFIG_CONTENT sets provider.openai.options.baseURL=https://gw/v1: replaced "
        "for this run; ember forwards to its own upstream"
    ]
    with pytest.raises(ClientError, match="OPENCODE_CONFIG_CONTENT is not valid JSON"):
        opencode.launch("oc", [], ADDR, "/w", {"OPENCODE_CONFIG_CONTENT": "{x"})


def test_opencode_setup_keeps_a_commented_config_and_prefers_its_jsonc(tmp_path: Path) -> None:
    text = '{\n  // mine\n  "model": "anthropic/claude-sonnet-4-5",\n}\n'
    merged = opencode.merge(text, ADDR)
    assert merged.startswith('{\n  // mine\n  "model": "anthropic/claude-sonnet-4-5",\n')
    assert jsonc.loads(merged, "f")["provider"]["anthropic"]["options"]["baseURL"].endswith("/v1")
    assert opencode.merge(merged, ADDR) == merged
    folder = tmp_path / "opencode"
    folder.mkdir()
    (folder / "opencode.jsonc").write_text("{}")
    assert (
        opencode.config_path({"XDG_CONFIG_HOME": str(tmp_path)}, tmp_path).name == "opencode.jsonc"
    )


def test_qwen_run_sets_both_base_urls_and_says_what_it_replaces() -> None:
    plan = qwen.launch("qwen", ["-p", "hi"], ADDR, {"OPENAI_BASE_URL": "https://dash/v1"})
    assert plan.env["OPENAI_BASE_URL"] == "http://127.0.0.1:8787/v1"
    assert plan.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
    assert plan.notes and "OPENAI_BASE_URL=https://dash/v1 is replaced" in plan.notes[0]


def test_qwen_setup_sets_the_base_url_its_auth_type_needs() -> None:
    merged = qwen.merge('{"security": {"auth": {"selectedType": "anthropic"}}}', ADDR)
    assert jsonc.loads(merged, "f")["security"]["auth"]["baseUrl"] == "http://127.0.0.1:8787"
    plain = jsonc.loads(qwen.merge(None, ADDR), "f")
    assert plain["security"]["auth"]["baseUrl"] == "http://127.0.0.1:8787/v1"


def test_gemini_setup_selects_the_api_key_but_never_replaces_a_sign_in() -> None:
    merged = gemini.merge('{\n  // mine\n  "ui": {"theme": "x"}\n}\n', ADDR)
    assert "// mine" in merged
    assert jsonc.loads(merged, "f")["security"]["auth"]["selectedType"] == "gemini-api-key"
    with pytest.raises(ClientError, match="oauth-personal"):
        gemini.merge('{"security": {"auth": {"selectedType": "oauth-personal"}}}', ADDR)
    env = gemini.merge_env("# keys\nGEMINI_API_KEY=abc\nGOOGLE_GEMINI_BASE_URL=https://x", ADDR)
    assert env == "# keys\nGEMINI_API_KEY=abc\nGOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787\n"
    assert gemini.merge_env(env, ADDR) == env


def test_gemini_headers_keep_the_users_and_skip_a_path_with_a_comma() -> None:
    assert gemini.custom_headers("a: 1, x-ember-cwd: /old", "/w") == "a: 1, x-ember-cwd: /w"
    plan = gemini.launch("g", [], ADDR, "/w/a,b:c", {"GEMINI_API_KEY": "k"}, None, None)
    assert "GEMINI_CLI_CUSTOM_HEADERS" not in plan.env
    assert plan.files == {}


def test_gemini_run_writes_a_defaults_file_keeping_the_users_own_defaults(tmp_path: Path) -> None:
    where = tmp_path / "run" / "g.json"
    plan = gemini.launch(
        "g", [], ADDR, "/w", {"GEMINI_API_KEY": "k"}, None, (where, '{"ui": {"theme": "t"}}')
    )
    written = json.loads(plan.files[str(where)])
    assert written == {
        "ui": {"theme": "t"},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
    }
    assert plan.env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"] == str(where)
    chosen = ("gemini-api-key", "settings.json")
    assert gemini.launch("g", [], ADDR, "/w", {"GEMINI_API_KEY": "k"}, chosen, None).files == {}


def test_aider_run_file_carries_the_users_extra_params_and_their_own_entries() -> None:
    home = (
        "- name: aider/extra_params\n  extra_params:\n"
        "    extra_headers: {x-a: '1'}\n    top_p: 0.5\n"
    )
    own = "- name: openai/gpt-4.1\n  edit_format: whole\n"
    plan = aider.launch(
        "aider",
        ["--model-settings-file=m.yml", "--message", "hi"],
        ADDR,
        "/w",
        {},
        "aider-s1",
        Path("/run/a.yml"),
        [("~/.aider.model.settings.yml", home), ("m.yml", own)],
    )
    assert plan.argv == [
        "aider",
        "--set-env",
        "OPENAI_BASE_URL=http://127.0.0.1:8787/v1",
        "--set-env",
        "ANTHROPIC_API_BASE=http://127.0.0.1:8787",
        "--model-settings-file",
        "/run/a.yml",
        "--message",
        "hi",
    ]
    entries = json.loads(plan.files["/run/a.yml"])
    assert entries[0] == {"name": "openai/gpt-4.1", "edit_format": "whole"}
    assert entries[1]["extra_params"] == {
        "extra_headers": {"x-a": "1", "x-ember-session-id": "aider-s1", "x-ember-cwd": "/w"},
        "top_p": 0.5,
    }


def test_aider_setup_edits_the_set_env_list_and_keeps_every_other_line() -> None:
    conf = (
        "# mine\nmodel: sonnet\nset-env:\n  - FOO=bar  # keep\n"
        "  - OPENAI_BASE_URL=http://x\n\ndark-mode: true\n"
    )
    merged = aider.merge(conf, ADDR)
    assert merged == conf.replace(
        "  - OPENAI_BASE_URL=http://x\n",
        "  - OPENAI_BASE_URL=http://127.0.0.1:8787/v1\n  - ANTHROPIC_API_BASE=http://127.0.0.1:8787\n",
    )
    assert aider.merge(merged, ADDR) == merged
    assert aider.merge(None, ADDR).startswith("set-env:\n  - OPENAI_BASE_URL=")
    with pytest.raises(ClientError, match="add OPENAI_BASE_URL="):
        aider.merge("set-env: [A=B]\n", ADDR)
