"""`ember wrap` for OpenCode, Qwen Code, aider and Gemini CLI: the real command and proxy, a
fake agent on PATH that finds the proxy the way the real client does (tests/cli/fake_agent.py).

What each run must get: only the variables (or arguments) that point that client at ember,
its request resolved to the project with nothing else added by the user, its own files left
as they were, and any file the run needed gone once it exits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.server import BackgroundServer
from ember.testing import Emulator
from tests.cli.test_wrap import FAKE, Agents, _wait_free

CLIENT_VARS = ("OPENCODE_", "GEMINI_", "GOOGLE_", "QWEN_", "AIDER_", "LITELLM_")


@pytest.fixture
def upstream() -> Iterator[BackgroundServer]:
    with BackgroundServer(Emulator()) as srv:
        yield srv


@pytest.fixture
def agents(tmp_path: Path, upstream: BackgroundServer) -> Agents:
    made = Agents(tmp_path, upstream.url)
    source = FAKE.read_text()
    for name in ("opencode", "qwen", "aider", "gemini"):
        exe = made.bin / name
        exe.write_text(f"#!{sys.executable}\n{source}")
        exe.chmod(0o755)
    made.env = {k: v for k, v in made.env.items() if not k.startswith(CLIENT_VARS)}
    made.env["EMBER_GEMINI_URL"] = upstream.url
    return made


def _run(agents: Agents, client: str, *args: str, **env: str) -> dict[str, object]:
    r = agents.wrap(client, "--cwd", str(agents.project), "--", *args, FAKE_AGENT_CALL="1", **env)
    assert r.returncode == 0, r.stderr
    seen = agents.seen()
    assert seen["call"]["status"] == 200, seen["call"]  # type: ignore[index]
    return seen


def _added(agents: Agents, seen: dict[str, object], **given: str) -> dict[str, str]:
    """The variables the run got beyond the user's own environment (``agents.env`` and
    ``given``), none of which it lost."""
    env = seen["env"]
    assert isinstance(env, dict)
    base = {**agents.env, **given}
    if "call" in seen:
        base["FAKE_AGENT_CALL"] = "1"
    assert set(base) <= set(env)
    return {k: v for k, v in env.items() if base.get(k) != v}


def test_opencode_is_pointed_by_its_config_variable_and_keeps_the_users_own(
    agents: Agents,
) -> None:
    theirs = json.dumps({"provider": {"anthropic": {"options": {"timeout": 5}}}, "theme": "x"})
    seen = _run(agents, "opencode", "run", "hi", OPENCODE_CONFIG_CONTENT=theirs)
    assert seen["argv"] == [str(agents.bin / "opencode"), "run", "hi"]
    added = _added(agents, seen, OPENCODE_CONFIG_CONTENT=theirs)
    assert list(added) == ["OPENCODE_CONFIG_CONTENT"]
    config = json.loads(added["OPENCODE_CONFIG_CONTENT"])
    header = {"x-ember-cwd": str(agents.project)}
    assert config["theme"] == "x"
    assert config["provider"]["anthropic"]["options"] == {
        "timeout": 5,
        "baseURL": agents.origin + "/v1",
        "headers": header,
    }
    assert config["provider"]["openai"]["options"]["baseURL"] == agents.origin + "/v1"
    _wait_free(agents)
    assert agents.requests_recorded() == 1


def test_qwen_gets_both_base_urls_and_is_found_by_the_directory_its_first_message_names(
    agents: Agents,
) -> None:
    seen = _run(agents, "qwen", "-p", "hi", OPENAI_API_KEY="sk-test")
    assert seen["argv"] == [str(agents.bin / "qwen"), "-p", "hi"]
    assert _added(agents, seen, OPENAI_API_KEY="sk-test") == {
        "OPENAI_BASE_URL": agents.origin + "/v1",
        "ANTHROPIC_BASE_URL": agents.origin,
    }
    _wait_free(agents)
    assert agents.requests_recorded() == 1  # no header: the first message named the project


def test_qwen_is_told_when_a_model_of_its_settings_bypasses_ember(agents: Agents) -> None:
    settings = Path(agents.env["HOME"]) / ".qwen" / "settings.json"
    settings.parent.mkdir(parents=True)
    text = (
        '{\n  // mine\n  "modelProviders": {"openai": [{"id": "m", "baseUrl": "http://x/v1"}]}\n}\n'
    )
    settings.write_text(text)
    r = agents.wrap("qwen", "--cwd", str(agents.project), "--", "-p", "hi")
    assert r.returncode == 0, r.stderr
    assert "gives model 'm' (openai) its own baseUrl http://x/v1" in r.stderr
    assert settings.read_text() == text


def test_aider_sends_the_project_and_a_session_through_a_settings_file_of_the_run(
    agents: Agents, upstream: BackgroundServer
) -> None:
    home = Path(agents.env["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    mine = "- name: aider/extra_params\n  extra_params:\n    extra_headers:\n      x-mine: kept\n"
    (home / ".aider.model.settings.yml").write_text(mine)
    seen = _run(agents, "aider", "--message", "hi", OPENAI_API_KEY="sk-test")
    argv = seen["argv"]
    assert isinstance(argv, list)
    run_file = Path(argv[argv.index("--model-settings-file") + 1])
    assert run_file.parent == Path(agents.env["EMBER_HOME"]) / "run"
    assert not run_file.exists()  # removed once aider exited
    assert argv[-2:] == ["--message", "hi"]
    assert ["--set-env", f"OPENAI_BASE_URL={agents.origin}/v1"] == argv[1:3]
    assert (home / ".aider.model.settings.yml").read_text() == mine
    emulator = upstream.app
    assert isinstance(emulator, Emulator)
    sent = emulator.requests[0]  # the client's (shadow memory may read the session after)
    assert sent.header("x-mine") == "kept"  # the user's own extra header still goes
    assert sent.header("x-ember-cwd") is None  # ember's are read, never forwarded
    _wait_free(agents)
    assert agents.requests_recorded() == 1  # the header named the project


def test_aiders_own_model_settings_file_is_read_into_the_runs(agents: Agents) -> None:
    own = agents.project / "models.yml"
    own.write_text("- name: openai/gpt-4.1\n  edit_format: whole\n")
    r = agents.wrap(
        "aider", "--cwd", str(agents.project), "--", "--model-settings-file", "models.yml"
    )
    assert r.returncode == 0, r.stderr
    argv = agents.seen()["argv"]
    assert argv.count("--model-settings-file") == 1 and "models.yml" not in argv
    assert "--model-settings-file models.yml is read into ember's own" in r.stderr


def test_gemini_without_an_api_key_is_refused_before_it_starts(agents: Agents) -> None:
    r = agents.wrap("gemini", "--cwd", str(agents.project), "--", "-p", "hi")
    assert r.returncode != 0
    assert "$GEMINI_API_KEY, which is not set" in r.stderr
    assert not agents.record.exists()


def test_gemini_signed_in_with_google_is_refused_with_what_to_change(agents: Agents) -> None:
    settings = Path(agents.env["HOME"]) / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"security": {"auth": {"selectedType": "oauth-personal"}}}')
    r = agents.wrap("gemini", "--cwd", str(agents.project), "--", "-p", "hi", GEMINI_API_KEY="k")
    assert r.returncode != 0
    assert "selectedType='oauth-personal'" in r.stderr and "gemini-api-key" in r.stderr
    assert not agents.record.exists()


def test_gemini_gets_the_base_url_the_header_and_an_api_key_default(agents: Agents) -> None:
    seen = _run(
        agents, "gemini", "-p", "hi", GEMINI_API_KEY="k", GEMINI_CLI_CUSTOM_HEADERS="x-team: a"
    )
    added = _added(agents, seen, GEMINI_API_KEY="k", GEMINI_CLI_CUSTOM_HEADERS="x-team: a")
    defaults = Path(added.pop("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"))
    assert added == {
        "GOOGLE_GEMINI_BASE_URL": agents.origin,
        "GEMINI_CLI_CUSTOM_HEADERS": f"x-team: a, x-ember-cwd: {agents.project}",
    }
    assert defaults.parent == Path(agents.env["EMBER_HOME"]) / "run"
    assert not defaults.exists()  # the run's defaults file is gone with the run
    _wait_free(agents)
    assert agents.requests_recorded() == 1  # the header named the project


def test_a_run_file_below_a_directory_others_may_write_is_named(tmp_path: Path) -> None:
    """Gemini CLI refuses a settings file there: `ember wrap gemini` says so, and what to do."""
    from ember.cli.wrap import _writable_by_others

    shared = tmp_path / "shared"
    inner = shared / "ember" / "run"
    inner.mkdir(parents=True)
    shared.chmod(0o777)
    (shared / "ember").chmod(0o700)
    assert _writable_by_others(inner) == shared
    shared.chmod(0o755)
    found = _writable_by_others(inner)
    assert found is None or found not in (inner, shared / "ember", shared)
