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
from ember.store.schema import STATS


def fill(home: Path, counts: dict[str, int]) -> None:
    db = Database(stats_db_path(home), STATS)
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


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in ("EMBER_CONFIG", "EMBER_HOME"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def invoke(runner: CliRunner, home: Path, *args: str) -> tuple[int, str]:
    r = runner.invoke(cli, ["toin", *args], env={"EMBER_HOME": str(home)})
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
