"""``ember toin`` as a user runs it: publish with its floor, export and import between homes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.learn.toin.keys import PatternKey
from ember.learn.toin.patterns import Pattern
from ember.learn.toin.publish import HEADER
from ember.learn.toin.store import merge_patterns
from ember.store.database import Database
from ember.store.registry import stats_db_path
from ember.store.schema import STATS, for_postgres


def fill(home: Path, counts: dict[str, int], store_url: str | None = None) -> None:
    """``counts`` observations of each pattern in ``home``'s stats.db, or with ``store_url``
    in the PostgreSQL store's ``ember_home``."""
    db = Database(stats_db_path(home), STATS) if store_url is None else _pg(home, store_url)
    patterns = []
    for h, n in counts.items():
        p = Pattern(PatternKey("api_key", "claude-sonnet", h), "text:grep")
        for _ in range(n):
            p.observe(100, False, (), 1.0)
        patterns.append(p)
    try:
        db.write(lambda c: merge_patterns(c, patterns))
    finally:
        db.close()


def _pg(home: Path, url: str) -> Database:
    from ember.store.pg.database import PgDatabase
    from ember.store.pg.names import schema_name

    path = stats_db_path(home)
    return PgDatabase(path, for_postgres(STATS), url=url, schema_name=schema_name(home, path))


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in ("EMBER_CONFIG", "EMBER_HOME"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def invoke(
    runner: CliRunner, home: Path, *args: str, store_url: str | None = None
) -> tuple[int, str]:
    env = {"EMBER_HOME": str(home), "EMBER_STORE_URL": store_url}
    r = runner.invoke(cli, ["toin", *args], env=env)
    return r.exit_code, r.output


def test_publish_writes_the_rows_above_the_floor(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    fill(home, {"bb": 60, "aa": 50, "cc": 49})
    out = tmp_path / "recommendations.toml"
    code, text = invoke(runner, home, "publish", "--output", str(out))
    assert code == 0, text
    assert "2 patterns published (1 below 50 observations left out)" in text
    content = out.read_text()
    assert content.startswith(HEADER)
    assert [p["structure_hash"] for p in tomllib.loads(content)["pattern"]] == ["aa", "bb"]
    code, text = invoke(
        runner, home, "publish", "-o", str(out), "--min-observations", "55", "--json"
    )
    assert json.loads(text)["patterns"] == 1


def test_publish_on_a_fresh_home_says_nothing_was_observed(
    runner: CliRunner, tmp_path: Path
) -> None:
    code, text = invoke(runner, tmp_path / "home", "publish", "-o", str(tmp_path / "r.toml"))
    assert code == 0 and "observed nothing yet" in text
    assert tomllib.loads((tmp_path / "r.toml").read_text())["meta"]["patterns"] == 0


def test_export_import_between_two_homes(runner: CliRunner, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    fill(a, {"aa": 30})
    fill(b, {"aa": 25})
    export = tmp_path / "a.json"
    assert invoke(runner, a, "export", str(export))[0] == 0
    code, text = invoke(runner, b, "import", str(export))
    assert code == 0 and "1 patterns merged (0 new)" in text, text
    code, text = invoke(runner, b, "show", "--json")
    [top] = json.loads(text)["top"]
    assert top["observations"] == 55 and top["user_count"] == 2
    code, text = invoke(runner, b, "import", str(export))
    assert code != 0 and "already imported" in text


def test_import_refuses_a_file_that_is_not_an_export(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    code, text = invoke(runner, tmp_path / "home", "import", str(bad))
    assert code != 0 and "not an ember TOIN export" in text
    bad.write_text("not json")
    code, text = invoke(runner, tmp_path / "home", "import", str(bad))
    assert code != 0 and "is not a JSON file" in text


def test_with_store_url_the_commands_use_the_postgresql_store(
    runner: CliRunner, tmp_path: Path, pg_url: str
) -> None:
    """The proxy keeps the patterns in the store's ``ember_home``: show, publish and export
    read them there, import merges there, and no stats.db is made on the way."""
    home, files = tmp_path / "home", tmp_path / "files"
    code, text = invoke(runner, home, "show", "--json", store_url=pg_url)
    assert code == 0 and json.loads(text)["patterns"] == 0, text  # nothing there yet
    fill(home, {"aa": 30, "bb": 60}, store_url=pg_url)
    code, text = invoke(runner, home, "show", "--json", store_url=pg_url)
    assert json.loads(text)["patterns"] == 2, text
    out = tmp_path / "r.toml"
    code, text = invoke(runner, home, "publish", "-o", str(out), store_url=pg_url)
    assert code == 0 and "1 patterns published" in text, text
    export = tmp_path / "pg.json"
    assert invoke(runner, home, "export", str(export), store_url=pg_url)[0] == 0
    fill(files, {"aa": 10})  # an instance on files imports the store's patterns
    code, text = invoke(runner, files, "import", str(export))
    assert code == 0 and "2 patterns merged (1 new)" in text, text
    back = tmp_path / "files.json"
    assert invoke(runner, files, "export", str(back))[0] == 0
    code, text = invoke(runner, home, "import", str(back), store_url=pg_url)
    assert code == 0 and "2 patterns merged (0 new)" in text, text
    code, text = invoke(runner, home, "show", "--json", store_url=pg_url)
    by_key = {p["key"].rsplit("|", 1)[-1]: p["observations"] for p in json.loads(text)["top"]}
    assert by_key == {"aa": 30 + 40, "bb": 60 + 60}
    assert not stats_db_path(home).exists()
