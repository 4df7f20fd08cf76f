"""``ember doctor`` with ``store_url``: it checks the PostgreSQL store the proxy writes (not
EMBER_HOME's files): reachable, pgvector, each schema's migrations and rows, never showing
the URL's password; ``--recover``/``--db`` say they are about files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ember.cli import cli
from tests.conftest import StackFactory
from tests.memory.test_stage_e2e import run_agent
from tests.store.pg.relay import relay

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

PASSWORD = "s3cret-doctor-pw"


def doctor(home: Path, url: str, *args: str) -> tuple[int, str]:
    env = {"EMBER_HOME": str(home), "EMBER_STORE_URL": url, "EMBER_CONFIG": None}
    r = CliRunner().invoke(cli, ["doctor", *args], env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


def test_it_checks_the_store_and_each_schema(
    make_stack: StackFactory, pg_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with relay(pg_url) as server:
        url = server.url(PASSWORD)
        stack = make_stack(stages="features", store_url=url)
        run_agent(stack)
        stack.settle()
        code, text = doctor(home, url, "--json")
        assert code == 0, text
        report: dict[str, Any] = json.loads(text)
        human_code, human = doctor(home, url)
    assert PASSWORD not in text + human
    assert human_code == 0 and "store_url is set" in human and "No problems found" in human
    assert report["problems"] == 0 and report["store"].startswith("PostgreSQL ")
    server_finding, *schemas = report["findings"]
    assert "reachable" in server_finding["detail"] and "pgvector" in server_finding["detail"]
    by_kind = {f["detail"].split(";")[0]: f for f in schemas}
    project = by_kind["project schema"]
    assert project["subject"].startswith("PostgreSQL schema ember_p_")
    applied, total = project["detail"].split("; ")[1].split()[0].split("/")
    assert applied == total and "3 accounting rows" in project["detail"]
    assert "applied at next open" not in project["detail"]
    assert "stats schema" in by_kind  # ember_home: shaping's and TOIN's tables
    assert not (home / "projects").exists() and not (home / "stats.db").exists()


def test_a_migration_not_applied_yet_is_said(
    make_stack: StackFactory, pg_url: str, tmp_path: Path
) -> None:
    import psycopg

    stack = make_stack(store_url=pg_url)
    run_agent(stack)
    stack.settle()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        [schema] = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember_p_%'"
            ).fetchall()
        ]
        conn.execute(f"DELETE FROM {schema}._migrations WHERE name = 'traffic_0001_sightings'")
    code, text = doctor(tmp_path / "home", pg_url, "--json")
    [project] = [f for f in json.loads(text)["findings"] if "ember_p_" in f["subject"]]
    assert code == 0 and "1 applied at next open (traffic_0001_sightings)" in project["detail"]


def test_an_unreachable_store_is_a_problem_with_its_fix_and_no_password(
    pg_url: str, tmp_path: Path
) -> None:
    with relay(pg_url) as server:
        url = server.url(PASSWORD)
        server.close()
        code, text = doctor(tmp_path / "home", url)
    assert code == 1 and "problem" in text and "unreachable" in text
    assert "EMBER_STORE_URL" in text and "Traceback" not in text
    assert PASSWORD not in text


@pytest.mark.parametrize("flag", [["--recover"], ["--db", "x.db"]])
def test_file_only_flags_are_refused_saying_what_to_do(
    pg_url: str, tmp_path: Path, flag: list[str]
) -> None:
    code, text = doctor(tmp_path / "home", pg_url, *flag)
    assert code == 2 and "store_url is set" in text and "EMBER_STORE_URL=" in text
