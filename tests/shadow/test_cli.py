"""``ember shadow runs|proposals|compare`` as scripts and users call them (CONTRACT.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.project import ProjectRef
from ember.server import BackgroundServer
from ember.shadow import runs
from ember.shadow.models import CallUsage, RunPath, parse_facts
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT
from ember.store.transcript_rows import Row, insert_rows
from ember.testing import Emulator
from ember.testing.replies import Reply

P = ("--project-id", "acme")
S = "sess-cli"
RUN_KEYS = {
    "id",
    "session_id",
    "path",
    "model",
    "status",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "latency_ms",
    "estimated_usd",
    "error",
}
PROPOSAL_KEYS = {"id", "run_id", "content", "evidence", "validation_error"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def invoke(home: Path, *args: str, **env: str) -> Result:
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    clean.update({"EMBER_HOME": str(home), **env})
    return CliRunner().invoke(cli, ["shadow", *args], env=clean)


def record(
    conn: Connection,
    side: runs.Tables,
    path: RunPath,
    facts: list[dict[str, Any]],
    errors: list[str | None],
    usd: float | None,
) -> str:
    run_id = runs.new_id("r")
    runs.start_run(conn, run_id, S, 1, path, "turn-ended", "claude-sonnet-4-5", 1, 2, side)
    parsed = parse_facts({"facts": facts})
    finish = runs.Finish(
        "completed",
        [CallUsage("claude-sonnet-4-5", 100, 4000, 0, 80, usd)],
        latency_ms=1500.0,
        price_snapshot="builtin-2026-11",
    )
    runs.finish_run(conn, run_id, finish, list(zip(parsed, errors, strict=True)), S, tables=side)
    return run_id


def evidence(mid: str) -> list[dict[str, str]]:
    return [{"kind": "user-stated", "messageId": mid}]


@pytest.fixture
def project(home: Path) -> Iterator[dict[str, str]]:
    """A project where the shadow and the steward each read one session."""
    db = Database(ProjectRef("acme", "header:x-ember-project-id").db_path(home), PROJECT)
    rows = [
        Row("m1", S, 1, 0, 0, "user", "user", "d1", "部署使用独立工作区"),
        Row("m2", S, 1, 1, 0, "tool", "tool_result", "d2", "ok"),
    ]

    def job(conn: Connection) -> dict[str, str]:
        insert_rows(conn, rows)
        hot = record(
            conn,
            runs.SHADOW_TABLES,
            "hot",
            [
                {"content": "部署有独立工作区", "evidence": evidence("m1")},
                {"content": "Invented", "evidence": evidence("m-nowhere")},
            ],
            [None, "evidence m-nowhere is not a message of this project's transcript"],
            0.002,
        )
        steward = record(
            conn,
            runs.STEWARD_TABLES,
            "cold",
            [{"content": "部署使用独立工作区。", "evidence": evidence("m1")}],
            [None],
            None,  # the steward's model had no price
        )
        return {"hot": hot, "steward": steward}

    ids = db.write(job)
    db.close()
    yield ids


def lines(result: Result) -> list[dict[str, Any]]:
    """A list command's --json: one document, an array ([] when nothing matches)."""
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout only: a note may go to stderr
    assert isinstance(doc, list)
    return doc


def test_runs_json_has_the_contract_fields(home: Path, project: dict[str, str]) -> None:
    [run] = lines(invoke(home, "runs", *P, "--json"))
    assert set(run) >= RUN_KEYS
    assert (run["id"], run["path"], run["status"]) == (project["hot"], "hot", "completed")
    assert (run["input_tokens"], run["cache_read_tokens"], run["output_tokens"]) == (100, 4000, 80)
    assert run["estimated_usd"] == pytest.approx(0.002) and run["latency_ms"] == 1500.0
    assert (run["proposals"], run["valid_proposals"]) == (2, 1)
    [steward] = lines(invoke(home, "runs", *P, "--json", "--steward"))
    assert set(steward) >= RUN_KEYS
    assert (steward["path"], steward["estimated_usd"]) == ("steward", None)


def test_proposals_json_keeps_the_invalid_one_with_why(home: Path, project: dict[str, str]) -> None:
    both = lines(invoke(home, "proposals", *P, "--json"))
    assert all(set(p) >= PROPOSAL_KEYS for p in both) and len(both) == 2
    assert both[0]["evidence"] == evidence("m1")
    [bad] = lines(invoke(home, "proposals", *P, "--json", "--invalid"))
    assert bad["content"] == "Invented" and "m-nowhere" in bad["validation_error"]
    assert lines(invoke(home, "proposals", *P, "--json", "--run", "r_nope")) == []
    assert len(lines(invoke(home, "proposals", *P, "--json", "--run", project["hot"]))) == 2


def test_compare_json_keeps_the_measures_apart(home: Path, project: dict[str, str]) -> None:
    result = invoke(home, "compare", *P, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["exact"]["steward_covered_by_shadow"]["covered"] == 0
    assert report["evidence"]["steward_covered_by_shadow"]["covered"] == 1
    assert [n["shadow_content"] for n in report["evidence"]["neighbours"]] == ["部署有独立工作区"]
    assert report["semantic"]["computed"] is False
    assert "--semantic" in report["semantic"]["why"]
    assert report["cost"]["label"] == "list price snapshot, not subscription billing"
    assert report["cost"]["totals_usd"] == {"shadow": pytest.approx(0.002), "steward": None}
    assert [r["path"] for r in report["latency"]["rows"]] == ["hot", "steward"]
    shadow_quality = next(r for r in report["evidence_quality"]["rows"] if r["side"] == "shadow")
    assert (shadow_quality["ok"], shadow_quality["missing_target"]) == (1, 1)


def test_semantic_without_a_key_says_so_and_calls_nothing(
    home: Path, project: dict[str, str]
) -> None:
    report = json.loads(invoke(home, "compare", *P, "--json", "--semantic").output)
    assert report["semantic"]["computed"] is False
    assert "EMBER_LIGHT_API_KEY" in report["semantic"]["why"]


def test_semantic_pairs_come_from_the_light_model_and_are_accounted(
    home: Path, project: dict[str, str]
) -> None:
    emu = Emulator()
    emu.script(Reply('```json\n{"pairs": [[0, 0]]}\n```'))
    with BackgroundServer(emu) as server:
        env = {"EMBER_LIGHT_API_KEY": "sk-light", "EMBER_ANTHROPIC_URL": server.url}
        result = invoke(home, "compare", *P, "--json", "--semantic", **env)
        dry = invoke(home, "compare", *P, "--json", "--semantic", "--dry-run", **env)
    assert result.exit_code == 0, result.output
    semantic = json.loads(result.output)["semantic"]
    assert (
        semantic["computed"] is True and semantic["label"] == "reviewable pairs, not ground truth"
    )
    assert semantic["steward_covered_by_shadow"] == {"covered": 1, "total": 1, "share": 1.0}
    assert len(emu.requests) == 1  # the dry run called nothing
    assert emu.last_request.api_key == "sk-light"
    assert json.loads(dry.output)["semantic"]["would_call"][0]["session_id"] == S
    db = Database(ProjectRef("acme", "header:x-ember-project-id").db_path(home), PROJECT)
    try:
        origins = db.read(lambda c: [r[0] for r in c.execute("SELECT origin FROM exchanges")])
    finally:
        db.close()
    assert origins == ["compare"]


def test_human_output_says_how_each_number_was_computed(
    home: Path, project: dict[str, str]
) -> None:
    out = invoke(home, "compare", *P).output
    for phrase in (
        "list price snapshot, not subscription billing",
        "shared evidence is reported separately",
        "Evidence neighbours",
        "not computed",
        "nearest-rank",
        "pointer identity only",
    ):
        assert phrase in " ".join(out.split()), phrase
    runs_out = invoke(home, "runs", *P).output
    assert "price snapshot" in " ".join(runs_out.split()) and project["hot"] in runs_out


def test_a_missing_project_database_is_one_line_and_creates_nothing(home: Path) -> None:
    for command in ("runs", "proposals", "compare"):
        text = invoke(home, command, "--project-id", "never-seen")
        assert text.exit_code == 0  # nothing recorded yet is an answer, not a failure
        assert "This project has no ember data yet" in text.output
        assert "does not exist (nothing was created)" in " ".join(text.output.split())
    assert lines(invoke(home, "runs", "--project-id", "never-seen", "--json")) == []
    assert lines(invoke(home, "proposals", "--project-id", "never-seen", "--json")) == []
    report = json.loads(invoke(home, "compare", "--project-id", "never-seen", "--json").stdout)
    assert report["scope"]["compared_sessions"] == 0
    assert "no ember data yet" in report["semantic"]["why"]
    assert not home.exists()


def test_no_project_named_is_an_error_that_says_how(home: Path) -> None:
    result = invoke(home, "runs")
    assert result.exit_code != 0
    assert "--project-id" in str(result.exception) or "--project-id" in result.output
