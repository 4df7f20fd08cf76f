"""Each feature's settings written grouped — a ``[memory]`` table in the file, ``EMBER_MEMORY__*``
in the environment — as well as by the flat names users already type, which keep working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from ember.budget.settings import BudgetSettings
from ember.cli.features import features
from ember.compress.settings import CompressSettings
from ember.config import Settings, load_settings
from ember.errors import ConfigError, FeatureError
from ember.features import Feature, Registered
from ember.memory.settings import MemorySettings
from ember.sections import Section, env_names, models
from ember.shadow.settings import ShadowSettings


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config.toml"


def loaded(config: Path, text: str, **env: str) -> Settings:
    config.write_text(text)
    return load_settings(config, env={"EMBER_HOME": str(config.parent / "home"), **env})


def test_a_features_table_sets_what_its_flat_names_set(config: Path) -> None:
    """``[memory] mode`` is ``memory_mode``; a field not named after its feature keeps its
    name in the table (``light_model``, the switch ``shadow``); nested tables nest under it."""
    grouped = loaded(
        config,
        '[memory]\nmode = "tool"\nmax_items = 4\n'
        "[compress]\nmin_chars = 7000\n"
        '[shadow]\nshadow = "compare"\nlight_model = "small"\n'
        '[budget.projects."/src/api"]\ndaily_usd = 3\n',
    )
    flat = loaded(
        config,
        'memory_mode = "tool"\nmemory_max_items = 4\ncompress_min_chars = 7000\n'
        'shadow = "compare"\nlight_model = "small"\n'
        '[budget_projects."/src/api"]\ndaily_usd = 3\n',
    )
    for model in (MemorySettings, CompressSettings, ShadowSettings, BudgetSettings):
        assert grouped.section(model) == flat.section(model)
    memory = grouped.section(MemorySettings)
    assert (memory.memory_mode, memory.memory_max_items) == ("tool", 4)
    assert grouped.section(CompressSettings).compress_min_chars == 7000
    assert grouped.section(BudgetSettings).budget_projects["/src/api"].daily_usd == 3
    # a flat field named like its feature is still a plain value at the top level
    assert loaded(config, 'compress = "off"\n').section(CompressSettings).compress == "off"


def test_grouped_variables_set_what_the_flat_ones_set_and_name_themselves_in_errors(
    config: Path,
) -> None:
    s = loaded(config, "", EMBER_MEMORY__MODE="tool", EMBER_COMPRESS__MIN_CHARS="7000")
    assert s.section(MemorySettings).memory_mode == "tool"
    assert s.section(CompressSettings).compress_min_chars == 7000
    assert loaded(config, "", EMBER_SHADOW__SHADOW="off").section(ShadowSettings).shadow == "off"
    with pytest.raises(ConfigError, match=r"^EMBER_MEMORY__MAX_ITEMS: .*less than or equal"):
        loaded(config, "", EMBER_MEMORY__MAX_ITEMS="40")
    with pytest.raises(ConfigError, match=r"^config\.toml: memory\.max_items: .*less than"):
        loaded(config, "[memory]\nmax_items = 40\n")


def test_precedence_is_by_place_whatever_the_form(config: Path) -> None:
    """File < environment < flags, whichever way each writes the setting."""
    text = '[memory]\nmode = "tool"\n'
    assert loaded(config, text, EMBER_MEMORY_MODE="off").section("memory").memory_mode == "off"
    text = 'memory_mode = "tool"\n'
    assert loaded(config, text, EMBER_MEMORY__MODE="off").section("memory").memory_mode == "off"
    env = {"EMBER_HOME": str(config.parent), "EMBER_MEMORY__MODE": "off"}
    flag = load_settings(config, env=env, memory_mode="auto_tail")
    assert flag.section(MemorySettings).memory_mode == "auto_tail"


def test_one_setting_written_both_ways_in_one_place_names_both(config: Path) -> None:
    """Which of two values was meant cannot be guessed: start-up stops and says where."""
    with pytest.raises(ConfigError) as err:
        loaded(config, 'memory_mode = "tool"\n[memory]\nmode = "tool"\n')
    assert err.value.key == "config.toml: memory.mode" and "memory_mode" in err.value.problem
    with pytest.raises(ConfigError) as err:
        loaded(config, "", EMBER_MEMORY_MODE="tool", EMBER_MEMORY__MODE="off")
    assert "EMBER_MEMORY_MODE" in str(err.value) and "EMBER_MEMORY__MODE" in str(err.value)


def test_an_unknown_key_in_a_table_or_variable_suggests_the_known_one(config: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config\.toml: memory\.mod: unknown key\. Did you "):
        loaded(config, '[memory]\nmod = "tool"\n')
    with pytest.raises(ConfigError, match=r"memory\.memory_mode: .* In \[memory\] it is mode"):
        loaded(config, '[memory]\nmemory_mode = "tool"\n')
    with pytest.raises(ConfigError, match=r"^config\.toml: traffic\.traffic_learning: .*learning"):
        loaded(config, "[traffic]\ntraffic_learning = false\n")
    with pytest.raises(ConfigError, match="Did you mean EMBER_MEMORY__MODE"):
        loaded(config, "", EMBER_MEMORY__MOD="tool")
    with pytest.raises(ConfigError, match=r"^config\.toml: memory: must be a table"):
        loaded(config, "memory = 3\n")


def test_shadows_stopping_times_are_its_own_and_keep_their_names(config: Path) -> None:
    """``shadow_stop_seconds`` and ``shadow_finish_seconds`` moved from the kernel's settings
    to shadow's section: the same names, variables, bounds and errors; the proxy and the
    launcher still read them from ``Settings``."""
    assert "shadow_stop_seconds" not in Settings.model_fields
    assert "shadow_finish_seconds" not in Settings.model_fields
    default = loaded(config, "")
    assert (default.shadow_stop_seconds, default.shadow_finish_seconds) == (5.0, 120.0)
    s = loaded(config, "shadow_stop_seconds = 2\n", EMBER_SHADOW_FINISH_SECONDS="30")
    assert (s.shadow_stop_seconds, s.shadow_finish_seconds) == (2.0, 30.0)
    assert s.section(ShadowSettings).shadow_stop_seconds == 2.0
    grouped = loaded(config, "[shadow]\nstop_seconds = 1\n", EMBER_SHADOW__FINISH_SECONDS="9")
    assert (grouped.shadow_stop_seconds, grouped.shadow_finish_seconds) == (1.0, 9.0)
    with pytest.raises(ConfigError, match=r"^EMBER_SHADOW_STOP_SECONDS: .*less than or equal"):
        loaded(config, "", EMBER_SHADOW_STOP_SECONDS="99")
    with pytest.raises(ConfigError, match=r"^config\.toml: shadow_finish_seconds: "):
        loaded(config, "shadow_finish_seconds = -1\n")
    config.write_text("shadow_stop_seconds = 2\n")
    flag = load_settings(config, env={"EMBER_HOME": str(config.parent)}, shadow_stop_seconds=0.0)
    assert flag.shadow_stop_seconds == 0.0


def test_ember_features_prints_each_settings_key_in_its_table() -> None:
    listed = CliRunner().invoke(features, ["--json"])
    assert listed.exit_code == 0, listed.output
    found = {f["name"]: f for f in json.loads(listed.output)["features"]}
    assert found["memory"]["table"]["memory_mode"] == "memory.mode"
    assert found["shadow"]["table"]["light_model"] == "shadow.light_model"
    assert found["shadow"]["table"]["shadow_stop_seconds"] == "shadow.stop_seconds"
    text = CliRunner().invoke(features, [], env={"COLUMNS": "400"}).output
    assert "[memory] budget_tokens (memory_budget_tokens)" in text


class _Twice(BaseModel):
    memory_mode: str = "a"
    mode: str = "b"


class _Hello(BaseModel):
    greeting: str = "hi"


def test_two_fields_with_one_grouped_name_are_refused_at_registration() -> None:
    twice = Feature("memory", settings=_Twice, flat_settings=True)
    with pytest.raises(FeatureError, match=r"two settings of 'memory' have one name"):
        models([Registered(twice, "x:FEATURE", "builtin")])


def test_a_table_only_feature_takes_both_variable_forms() -> None:
    names = env_names({"hello": Section(_Hello, flat=False, name="hello")}, "EMBER_")
    assert names["EMBER_HELLO_GREETING"] == names["EMBER_HELLO__GREETING"] == ("hello", "greeting")


def test_the_readmes_grouped_example_is_what_it_says(config: Path) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n# the same as memory_mode", 1)[1].split("```", 1)[0]
    grouped = loaded(config, block.split("\n", 1)[1])
    flat = loaded(config, 'memory_mode = "tool"\nmemory_max_items = 4\ncompress_min_chars = 8000\n')
    for model in (MemorySettings, CompressSettings):
        assert grouped.section(model) == flat.section(model) != model()


def test_the_mcp_token_is_memorys_and_is_never_echoed(config: Path) -> None:
    """``mcp_token`` (read by ``ember mcp --http`` alone) moved to memory's section: the same
    names, the same rule for a guessable token, and a bad one is never shown in the error."""
    assert "mcp_token" not in Settings.model_fields
    token = "t" * 24
    assert loaded(config, "", EMBER_MCP_TOKEN=token).section(MemorySettings).mcp_token == token
    grouped = loaded(config, f'[memory]\nmcp_token = "{token}"\n')
    assert grouped.section(MemorySettings).mcp_token == token
    assert token not in repr(grouped.section(MemorySettings))
    for written in ({"EMBER_MCP_TOKEN": "short-secret"}, {"EMBER_MEMORY__MCP_TOKEN": "s3cr3t"}):
        with pytest.raises(ConfigError, match="at least 16 characters") as err:
            loaded(config, "", **written)
        ((key, secret),) = written.items()
        assert err.value.key == key and secret not in str(err.value)
