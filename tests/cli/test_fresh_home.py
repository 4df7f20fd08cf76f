"""Read-only commands on a project ember has never seen create nothing: no project folder, no
database, no exported file. They say in one line that the project has no ember data yet and
exit 0 when the answer is simply "nothing" (an empty list, no hits, no sessions); looking up
one memory by id is an error that says the same.

A read used to create the project's folder and an empty database for any --cwd typed, so a
typo left a project behind and the next `ember doctor` listed it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.commands import Ran, clean_env, run


@pytest.fixture(params=["empty", "missing"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    if request.param == "empty":
        home.mkdir()
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


def ember(home: Path, *args: str) -> Ran:
    """``HOME`` beside the home: an export for claude would write under ~/.claude."""
    return run(args, clean_env(home, HOME=str(home.parent / "user")))


def untouched(home: Path, project: Path) -> None:
    assert not home.exists() or list(home.iterdir()) == [], sorted(home.rglob("*"))
    assert list(project.iterdir()) == []
    assert not (home.parent / "user").exists()


READS = [
    ("memory", "list"),
    ("memory", "search", "which database?"),
    ("memory", "export", "--format", "generic"),
    ("memory", "export", "--format", "claude"),
    ("stats",),
    ("shadow", "runs"),
    ("shadow", "proposals"),
    ("shadow", "compare"),
]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_says_there_is_no_data_yet_in_one_line(
    home: Path, project: Path, args: tuple[str, ...]
) -> None:
    r = ember(home, *args, "--cwd", str(project))
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"This project has no ember data yet: {_db(home, r)} does not exist (nothing was created)."
    ]
    assert r.stderr == ""
    untouched(home, project)


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_with_json_a_read_prints_an_empty_document(
    home: Path, project: Path, args: tuple[str, ...]
) -> None:
    r = ember(home, *args, "--cwd", str(project), "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout holds the JSON document only
    if args[-1] in ("list", "runs", "proposals"):
        assert doc == []
    assert "no ember data yet" in r.stderr or args == ("stats",)
    untouched(home, project)


def test_empty_documents_keep_their_shapes(home: Path, project: Path) -> None:
    P = ("--cwd", str(project), "--json")
    assert json.loads(ember(home, "memory", "search", "q", *P).stdout) == {"query": "q", "hits": []}
    many = json.loads(ember(home, "memory", "search", "a", "b", *P).stdout)
    assert many == [{"query": "a", "hits": []}, {"query": "b", "hits": []}]
    stats = json.loads(ember(home, "stats", *P).stdout)
    assert (stats["sessions"], stats["ember_spend"]) == ([], [])
    export = json.loads(ember(home, "memory", "export", "--format", "codex", *P).stdout)
    assert export == {"path": str(project / "AGENTS.md"), "memories": 0, "tokens": 0,
                      "changed": False}  # fmt: skip
    compare = json.loads(ember(home, "shadow", "compare", *P).stdout)
    assert compare["scope"]["compared_sessions"] == 0
    untouched(home, project)


@pytest.mark.parametrize("command", ["show", "delete"])
def test_one_memory_by_id_is_not_found_and_says_why(
    home: Path, project: Path, command: str
) -> None:
    r = ember(home, "memory", command, "--cwd", str(project), "0123456789ab")
    assert r.code == 2
    [line] = r.stderr.splitlines()
    assert line.startswith("ember: error: no memory with id '0123456789ab': the project has no")
    untouched(home, project)


def test_export_with_a_destination_writes_nothing_either(home: Path, project: Path) -> None:
    dest = project.parent / "dest"
    r = ember(home, "memory", "export", "--cwd", str(project), "--format", "codex",
              "--dest", str(dest))  # fmt: skip
    assert r.code == 0 and not dest.exists()
    untouched(home, project)


def test_the_global_stats_and_toin_read_nothing_into_being(home: Path, project: Path) -> None:
    for args in (("stats",), ("stats", "--json"), ("toin", "show"), ("output-savings",)):
        r = ember(home, *args)
        assert r.code == 0, (args, r.stderr)
    assert ember(home, "stats").stdout.startswith("No sessions recorded: ")
    untouched(home, project)


def _db(home: Path, r: Ran) -> str:
    """The project database path the line names (its hash is the resolver's business)."""
    start = r.stdout.index(str(home / "projects"))
    return r.stdout[start : r.stdout.index(" does not exist")]
