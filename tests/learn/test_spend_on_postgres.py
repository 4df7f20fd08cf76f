"""``ember learn``'s model call, recorded with ``store_url`` set: the row goes to the
PostgreSQL store's ``ember_home`` (where ``ember stats`` then reads it), not to a stats.db
nobody reads on that store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.learn.analyze import Answer
from ember.learn.spend import learn_record, record_learn_spend
from ember.prices import PriceTable
from ember.protocols.base import Usage

pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def test_learn_spend_lands_in_the_store_and_stats_shows_it(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    answer = Answer("{}", "claude-sonnet-4-5", Usage(input_tokens=1200, output_tokens=300))
    record = learn_record(answer, "anthropic", PriceTable(), 1_796_000_000.0, 2.5)
    where = record_learn_spend(home, record, pg_url)
    assert where.startswith("PostgreSQL schema ember_home")
    assert not (home / "stats.db").exists()
    env = {"EMBER_HOME": str(home), "EMBER_STORE_URL": pg_url, "EMBER_CONFIG": None}
    shown = CliRunner().invoke(cli, ["stats", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    assert report["sessions"] == []  # never folded into a user's session
    [spend] = report["ember_spend"]
    assert (spend["origin"], spend["requests"]) == ("learn", 1)
    assert spend["cost_usd"] == pytest.approx(record.cost_usd)
    assert record.cost_usd is not None and record.cost_usd > 0
