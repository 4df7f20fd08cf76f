from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.config import load_settings
from ember.errors import ConfigError
from ember.testing.postgres import ENV_REQUIRED, ENV_URL


def test_defaults(tmp_path: Path) -> None:
    s = load_settings(env={"EMBER_HOME": str(tmp_path)})
    assert (s.host, s.port, s.anthropic_url) == ("127.0.0.1", 8787, "https://api.anthropic.com")
    assert s.openai_url == "https://api.openai.com/v1"
    assert s.home == tmp_path


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('port = 1111\nhost = "0.0.0.0"\nanthropic_url = "http://a/"\n')
    s = load_settings(cfg, env={"EMBER_PORT": "2222"}, host="127.0.0.2")
    assert (s.port, s.host, s.anthropic_url) == (2222, "127.0.0.2", "http://a")


def test_default_config_file_in_home_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("port = 9999\n")
    assert load_settings(env={"EMBER_HOME": str(tmp_path)}).port == 9999


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"EMBER_PROT": "1"}, "EMBER_PROT"),
        ({"EMBER_PORT": "eighty"}, "EMBER_PORT"),
        ({"EMBER_PORT": "70000"}, "EMBER_PORT"),
        ({"EMBER_UNRESOLVED_PROJECT": "globl"}, "EMBER_UNRESOLVED_PROJECT"),
        ({"EMBER_ANTHROPIC_URL": "api.anthropic.com"}, "EMBER_ANTHROPIC_URL"),
    ],
)
def test_bad_env_names_the_variable(env: dict[str, str], named: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env={"EMBER_HOME": str(tmp_path), **env})
    assert err.value.key == named


def test_unknown_env_suggests_the_right_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Did you mean EMBER_PORT"):
        load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_PROT": "1"})


def test_the_test_harness_variables_are_not_settings_but_their_typos_are_errors(
    tmp_path: Path,
) -> None:
    """EMBER_TEST_PG_URL set in a developer's shell must not stop every ember command."""
    harness = {ENV_URL: "postgresql://someone@/db", ENV_REQUIRED: "1"}
    assert load_settings(env={"EMBER_HOME": str(tmp_path), **harness}).home == tmp_path
    with pytest.raises(ConfigError) as err:
        load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_TEST_PG_ULR": "x"})
    assert err.value.key == "EMBER_TEST_PG_ULR"


def test_bad_file_key_and_value_name_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("prot = 1\n")
    with pytest.raises(ConfigError, match=r"c\.toml: prot.*Did you mean port"):
        load_settings(cfg, env={})
    cfg.write_text('[prices."my-model"]\ninput = -1\noutput = 1\ncache_read = 0\n')
    with pytest.raises(ConfigError, match=r"c\.toml: prices.*my-model\.input"):
        load_settings(cfg, env={})
    cfg.write_text("port = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(cfg, env={})


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml", env={})


def test_price_overrides_reach_the_price_table(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[prices."local-llm"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.1\n')
    table = load_settings(cfg, env={}).price_table()
    assert table.lookup("local-llm") is not None
    assert table.snapshot.startswith("builtin-") and "+config-" in table.snapshot


def test_request_limits_come_from_env_and_refuse_values_past_their_caps(tmp_path: Path) -> None:
    home = {"EMBER_HOME": str(tmp_path)}
    s = load_settings(env={**home, "EMBER_MAX_BODY_MB": "8", "EMBER_MAX_JSON_DEPTH": "64"})
    assert (s.max_body_mb, s.max_json_depth) == (8, 64)
    # past 512 the stdlib scanner that locates edits would hit Python's recursion limit
    for key, value in (("EMBER_MAX_JSON_DEPTH", "600"), ("EMBER_MAX_BODY_MB", "0")):
        with pytest.raises(ConfigError) as err:
            load_settings(env={**home, key: value})
        assert err.value.key == key


def test_provider_url_never_doubles_the_openai_v1_and_keeps_the_query() -> None:
    s = load_settings(env={}, anthropic_url="https://a.example", openai_url="https://o.example/v1")
    assert s.provider_url("anthropic", "/v1/messages", "beta=true") == (
        "https://a.example/v1/messages?beta=true"
    )
    assert s.provider_url("openai_responses", "/v1/responses") == "https://o.example/v1/responses"
    assert s.provider_url("openai_chat", "/chat/completions") == (
        "https://o.example/v1/chat/completions"
    )


def test_ember_own_features_settings_keep_their_names_and_live_with_the_feature(
    tmp_path: Path,
) -> None:
    """``traffic_learning`` and ``toin`` are declared by their features (sections), yet are
    typed exactly as before: top-level keys, EMBER_<NAME>, flags; a misspelling still says
    what was meant, in a table of the feature's name too."""
    assert load_settings(env={}, home=tmp_path).section("learn").toin is True
    off = load_settings(env={"EMBER_TOIN": "false"}, home=tmp_path)
    assert off.section("learn").toin is False
    config = tmp_path / "config.toml"
    config.write_text("traffic_learning = false\n")
    assert load_settings(config, env={}).section("traffic").traffic_learning is False
    flag = load_settings(config, env={}, traffic_learning=True)
    assert flag.section("traffic").traffic_learning is True  # the flag wins, as for any key
    config.write_text("trafic_learning = false\n")
    with pytest.raises(ConfigError, match="Did you mean traffic_learning"):
        load_settings(config, env={})
    config.write_text("[traffic]\ntraffic_learning = false\n")  # in its table it is `learning`
    with pytest.raises(ConfigError, match=r"config\.toml: traffic\.traffic_learning: unknown key"):
        load_settings(config, env={})
    with pytest.raises(ConfigError, match="EMBER_TOIN: Input should be a valid boolean"):
        load_settings(env={"EMBER_TOIN": "maybe"}, home=tmp_path / "other")


def test_memory_settings_keep_their_names_in_the_file_and_the_environment(tmp_path: Path) -> None:
    """Memory's settings are its own section, flat: the keys users type did not change."""
    from ember.memory.settings import MemorySettings

    cfg = tmp_path / "c.toml"
    cfg.write_text('memory_mode = "tool"\nmemory_max_items = 4\n')
    settings = load_settings(cfg, env={"EMBER_MEMORY_MIN_SCORE": "0.5"})
    memory = settings.section(MemorySettings)
    assert (memory.memory_mode, memory.memory_max_items, memory.memory_min_score) == (
        "tool",
        4,
        0.5,
    )
    assert settings.section("memory") is memory  # one section, by name or by model
    with pytest.raises(ConfigError, match="Did you mean EMBER_MEMORY_MIN_SCORE"):
        load_settings(env={"EMBER_MEMORY_MIN_SCOR": "0.5"})
    with pytest.raises(ConfigError, match=r"c\.toml: memory_max_items"):
        cfg.write_text("memory_max_items = 11\n")  # past the hard cap of 10
        load_settings(cfg, env={})


def test_a_model_no_feature_registers_is_refused_not_defaulted(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Stray(BaseModel):
        x: int = 1

    with pytest.raises(KeyError, match="no registered feature declares Stray"):
        load_settings(env={}).section(Stray)


def _fresh(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter (this one loaded ember.compose through the conftest)."""
    env = {**os.environ, "EMBER_HOME": str(home), "EMBER_MEMORY_MODE": "tool"}
    env.pop("EMBER_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_settings_loaded_where_no_entry_point_installed_the_features_say_how_to_fix_it(
    tmp_path: Path,
) -> None:
    """Without the features' sections ``EMBER_MEMORY_MODE`` would be refused as unknown (or a
    section read back as silent defaults): a program that loads only ``ember.config`` is told
    to load the composition root instead."""
    done = _fresh("from ember.config import load_settings\nload_settings()", tmp_path)
    assert done.returncode == 1
    assert "NotInstalled: ember's features are not installed in this process" in done.stderr
    assert "import ember.compose" in done.stderr


@pytest.mark.parametrize("entry", ["ember.compose", "ember.memory.library", "ember.cli"])
def test_an_entry_point_gives_load_settings_the_features_sections(
    tmp_path: Path, entry: str
) -> None:
    """README's library mode imports ``ember.config`` and a library module, never
    ``ember.compose``: the features' settings are read all the same."""
    code = (
        f"import {entry}\nfrom ember.config import load_settings\n"
        "print(load_settings().section('memory').memory_mode)"
    )
    done = _fresh(code, tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "tool"), done.stderr
