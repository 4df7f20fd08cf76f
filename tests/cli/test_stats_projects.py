"""A bare ``ember stats`` on a home whose sessions are all in project databases says where
they are and how to see them, instead of a plain "No sessions recorded"."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ember.project import ProjectRef
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.schema import PROJECT
from tests.cli.commands import clean_env, run

BY_PATH = ProjectRef("/home/dev/acme api", "header:x-ember-cwd")
BY_ID = ProjectRef("billing", "header:x-ember-project-id")


def record(db: Path, project: str, sessions: int) -> None:
    database = Database(db, PROJECT)
    try:
        for i in range(sessions):
            row = ExchangeRecord(1_790_000_000.0 + i, f"s{i}", project, "anthropic",
                                 "claude-sonnet-4-5", 200, "ok", True, Usage(10, 5), 0.001,
                                 "snap", 1.0, None)  # fmt: skip
            database.write(row.insert)
    finally:
        database.close()


def a_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    record(BY_PATH.db_path(home), BY_PATH.identity, 3)
    record(BY_ID.db_path(home), BY_ID.identity, 1)
    return home


def stats(home: Path, *args: str) -> tuple[int, str]:
    r = run(["stats", *args], clean_env(home))
    assert not r.traceback, r.stderr
    return r.code, r.stdout


def test_a_bare_stats_lists_the_projects_and_the_command_that_shows_each(
    tmp_path: Path,
) -> None:
    home = a_home(tmp_path)
    code, out = stats(home)
    assert code == 0
    assert out.startswith("No sessions recorded: ") and "2 project(s) hold 4 session(s)" in out
    path_line = next(line for line in out.splitlines() if "acme api" in line)
    id_line = next(line for line in out.splitlines() if line.strip().startswith("billing"))
    assert "3 session(s)" in path_line and "ember stats --cwd '/home/dev/acme api'" in path_line
    assert "1 session(s)" in id_line and "ember stats --project-id billing" in id_line
    # the printed commands work, as printed
    for line, sessions in ((path_line, 3), (id_line, 1)):
        command = shlex.split(line[line.index("ember stats") :])
        code, shown = stats(home, *command[2:], "--json")
        assert code == 0 and len(json.loads(shown)["sessions"]) == sessions
    assert not (home / "stats.db").exists()  # a read creates nothing


def test_the_json_stays_one_document_and_lists_them_too(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    code, out = stats(home, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["sessions"] == []
    assert [(p["identity"], p["sessions"], p["command"]) for p in doc["projects"]] == [
        ("/home/dev/acme api", 3, "ember stats --cwd '/home/dev/acme api'"),
        ("billing", 1, "ember stats --project-id billing"),
    ]


def test_a_project_file_that_cannot_be_read_is_named_with_ember_doctor(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    damaged = BY_ID.db_path(home)
    damaged.write_bytes(b"this is not a database" * 100)
    code, out = stats(home)
    assert code == 0 and "1 project(s) hold 3 session(s)" in out
    [line] = [line for line in out.splitlines() if damaged.parent.name in line]
    assert "cannot be read" in line and "`ember doctor`" in line


def test_an_empty_home_says_only_that_nothing_is_recorded(tmp_path: Path) -> None:
    code, out = stats(tmp_path / "home")
    assert code == 0 and out.startswith("No sessions recorded: ")
    assert "project(s)" not in out
    assert json.loads(stats(tmp_path / "home", "--json")[1])["projects"] == []
