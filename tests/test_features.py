"""Features as units: the app, the schemas and the CLI are put together from the registered
features, and a feature another package ships plugs in through an entry point — its stage
runs in the real ``ember proxy``, its table is created in the project database, its command is
in ``ember --help`` — without a line of ember changing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.compose import spec
from ember.config import load_settings
from ember.errors import ConfigError, FeatureError
from ember.features import BUILTIN, ENTRY_POINT_GROUP, Feature, resolve
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.store.schema import PROJECT, STATS
from ember.testing import Emulator
from tests.proxy.subprocess_proxy import proxy_process
from tests.traffic.conversation import db_path, send

PLUGIN = '''
"""A feature another package ships: it counts the answered requests of each project."""

import click
from pydantic import BaseModel, ConfigDict, Field

from ember.config import load_settings
from ember.exchange import Stage
from ember.features import Feature
from ember.store.migrations import Migration


class HelloSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    greeting: str = "hello"
    times: int = Field(default=1, ge=1)


class Counting(Stage):
    name = "hello"

    async def start(self, services):
        self.storage = services.storage
        self.home = services.settings.home

    async def on_response(self, ex, outcome):
        if ex.project is not None:
            db = self.storage.database(ex.project.db_path(self.home))
            await db.awrite(
                lambda c: c.execute("INSERT INTO hello_seen (status) VALUES (?)", (outcome.status,))
            )


@click.command("hello")
def hello():
    """Say that the feature is there."""
    section = load_settings().section("{name}")
    click.echo(" ".join([section.greeting] * section.times) + " from a third-party feature")


FEATURE = Feature(
    "{name}",
    stages=lambda comp: (Counting(),),
    project_migrations=lambda: (
        Migration("hello_0001_seen", "CREATE TABLE hello_seen (status INTEGER NOT NULL);"),
    ),
    commands=lambda: (hello,),
    settings=HelloSettings,
)
'''


def install_plugin(root: Path, name: str = "hello") -> dict[str, str]:
    """A package on ``sys.path`` with the dist-info metadata pip writes: the same lookup
    (``importlib.metadata.entry_points``) finds it as finds a pip-installed one. Returns the
    environment a subprocess needs to see it."""
    root.mkdir(parents=True)
    (root / "ember_hello.py").write_text(PLUGIN.replace("{name}", name), encoding="utf-8")
    info = root / "ember_hello-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ember-hello\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = ember_hello:FEATURE\n")
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def tables_created(migrations: object) -> set[str]:
    import re

    sql = " ".join(m.sql for m in migrations)  # type: ignore[attr-defined]
    return set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", sql))


def ember(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    cmd = [sys.executable, "-m", "ember", *args]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=60)


def test_the_builtin_features_come_in_pipeline_order() -> None:
    assert [f.name for f in spec().features[: len(BUILTIN)]] == [
        "budget",  # first: a refused request is never edited or searched for
        "shaping",
        "memory",
        "compress",  # after memory: its search reads the outputs as the tools gave them
        "shadow",
        "traffic",
        "learn",
        "retention",  # nothing per request: the store's daily prune (store_retention_days)
        "otel",  # last: its span carries what the others noted
    ]


def test_a_command_declared_by_name_is_the_one_its_feature_builds() -> None:
    """``ember mcp`` is run from its reference alone (``Feature.command_refs``); the list,
    the help and ``ember features`` show the feature's built commands: the same command."""
    declared = 0
    for feature in spec().features:
        built = {c.name: c for c in feature.commands()}
        for name in feature.command_refs:
            assert spec().command_named(name) is built[name], (feature.name, name)
            declared += 1
    assert declared and spec().command_named("mcp") is not None
    assert spec().command_named("no-such-command") is None


def test_the_schemas_are_the_kernels_then_each_features_in_order() -> None:
    """The order a new database is built in: a migration may rely on an earlier one."""
    from ember.store.schema.accounting import ACCOUNTING

    expected = list(ACCOUNTING)
    for feature in spec().features:
        expected.extend(feature.project_migrations())
    assert list(PROJECT.migrations) == expected
    assert {"memories", "shadow_memory_runs", "traffic_sightings"} <= tables_created(
        PROJECT.migrations
    )
    assert "toin_patterns" in tables_created(STATS.migrations)
    assert "toin_patterns" not in tables_created(PROJECT.migrations)


def test_a_reference_that_is_not_a_feature_is_refused_with_what_it_is() -> None:
    from ember.errors import FeatureError

    with pytest.raises(FeatureError, match="is a str, not a Feature"):
        resolve("ember.features:ENTRY_POINT_GROUP")
    with pytest.raises(FeatureError, match="cannot be loaded"):
        resolve("ember_no_such_module:FEATURE")
    assert isinstance(resolve(BUILTIN[0]), Feature)


def test_a_third_party_feature_plugs_into_the_real_proxy_and_cli(tmp_path: Path) -> None:
    env = install_plugin(tmp_path / "site")
    listed = ember("--help", env=env)
    assert listed.returncode == 0 and "hello" in listed.stdout
    said = ember("hello", env=env)
    assert said.stdout.strip() == "hello from a third-party feature"

    home = tmp_path / "home"
    with (
        BackgroundServer(Emulator()) as upstream,
        proxy_process(home, upstream.url, env=env) as (
            _,
            url,
        ),
    ):
        send(url, "aaaaaaaa-0001", [{"role": "user", "content": "Run the tests."}])
        send(url, "aaaaaaaa-0001", [{"role": "user", "content": "And lint."}])
    # its table is in the project database, next to ember's, and its stage filled it
    conn = connect(db_path(home), readonly=True).conn
    try:
        seen = [r[0] for r in conn.execute("SELECT status FROM hello_seen")]
        accounted = conn.execute(
            "SELECT COUNT(*) FROM exchanges WHERE origin = 'client'"
        ).fetchone()[0]
    finally:
        conn.close()
    assert seen == [200, 200]
    assert accounted == 2  # the kernel's accounting still ran, after the feature


def test_a_feature_cannot_take_a_builtin_name(tmp_path: Path) -> None:
    env = install_plugin(tmp_path / "site", name="memory")
    listed = ember("--help", env=env)
    assert listed.returncode == 0  # the other commands still work...
    assert "feature 'ember_hello:FEATURE' is named 'memory'" in listed.stderr  # ...and it says
    refused = pytest.raises(RuntimeError, match="a feature cannot replace another")
    with (
        BackgroundServer(Emulator()) as upstream,
        refused,
        proxy_process(tmp_path / "home", upstream.url, env=env),
    ):
        pass


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin installed in this process too (the registry is read afresh)."""
    site = tmp_path / "site"
    install_plugin(site)
    monkeypatch.syspath_prepend(str(site))
    spec.cache_clear()
    yield site
    sys.modules.pop("ember_hello", None)
    spec.cache_clear()


def test_a_features_section_comes_from_the_file_and_the_environment(
    plugin: Path, tmp_path: Path
) -> None:
    assert load_settings(env={}, home=tmp_path).section("hello").greeting == "hello"
    config = tmp_path / "config.toml"
    config.write_text('port = 9000\n[hello]\ngreeting = "hey"\ntimes = 2\n')
    from_file = load_settings(config, env={}).section("hello")
    assert (from_file.greeting, from_file.times) == ("hey", 2)
    # the environment wins over the file, key by key, as for every setting
    both = load_settings(config, env={"EMBER_HELLO_GREETING": "hi"}).section("hello")
    assert (both.greeting, both.times) == ("hi", 2)
    grouped = load_settings(config, env={"EMBER_HELLO__TIMES": "3"}).section("hello")
    assert (grouped.greeting, grouped.times) == ("hey", 3)


def test_a_features_bad_or_unknown_setting_says_where_and_what_was_meant(
    plugin: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        ConfigError, match=r"EMBER_HELLO_GRETING: .*Did you mean EMBER_HELLO_GREETING"
    ):
        load_settings(env={"EMBER_HELLO_GRETING": "hi"}, home=tmp_path)
    with pytest.raises(ConfigError, match=r"EMBER_HELLO_TIMES: .*greater than or equal to 1"):
        load_settings(env={"EMBER_HELLO_TIMES": "0"}, home=tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("[hello]\ngretting = 1\n")
    with pytest.raises(ConfigError, match=r"config.toml: hello.gretting: .*Did you mean greeting"):
        load_settings(config, env={})
    config.write_text("[helo]\ngreeting = 1\n")
    with pytest.raises(ConfigError, match=r"config.toml: helo: .*Did you mean hello"):
        load_settings(config, env={})


def test_the_cli_command_of_a_feature_reads_its_section(tmp_path: Path) -> None:
    env = install_plugin(tmp_path / "site")
    said = ember("hello", env={**env, "EMBER_HELLO_GREETING": "hi", "EMBER_HELLO_TIMES": "2"})
    assert said.stdout.strip() == "hi hi from a third-party feature"


def test_ember_features_lists_an_installed_feature_with_its_source(tmp_path: Path) -> None:
    env = install_plugin(tmp_path / "site")
    listed = ember("features", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    found = {f["name"]: f for f in json.loads(listed.stdout)["features"]}
    assert list(found)[: len(BUILTIN)] == [
        "budget", "shaping", "memory", "compress", "shadow", "traffic", "learn", "retention",
        "otel",
    ]  # fmt: skip
    hello = found["hello"]
    assert (hello["source"], hello["reference"]) == ("ember-hello", "ember_hello:FEATURE")
    assert hello["commands"] == ["hello"] and hello["project_migrations"] == ["hello_0001_seen"]
    assert hello["settings"] == ["greeting", "times"]
    table = ember("features", env=env)
    assert "hello" in table.stdout and "ember-hello" in table.stdout


def test_a_feature_named_like_a_setting_is_refused_when_settings_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A feature named ``port`` would make ``[port]`` a table and ``port = 1`` its value at
    once: refused with the reference to rename, before any setting is read wrong."""
    site = tmp_path / "site"
    install_plugin(site, name="port")
    monkeypatch.syspath_prepend(str(site))
    spec.cache_clear()
    try:
        with pytest.raises(FeatureError, match="is named 'port', like a setting"):
            load_settings(env={}, home=tmp_path)
    finally:
        sys.modules.pop("ember_hello", None)
        spec.cache_clear()
