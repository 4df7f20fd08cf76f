"""Which project ``ember mcp`` serves, decided at start: never a guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.config import load_settings
from ember.errors import ProjectError
from ember.memory.mcp_target import NoProjectHere, served
from ember.project import project_from_cli


def settings(tmp_path: Path, **overrides: str):  # type: ignore[no-untyped-def]
    return load_settings(env={"EMBER_HOME": str(tmp_path / "home"), **overrides})


def test_the_working_directory_is_the_project(tmp_path: Path) -> None:
    s = settings(tmp_path)
    got = served(s, None, None, workdir=lambda: str(tmp_path))
    expected = project_from_cli(None, str(tmp_path))
    assert got.ref == expected and expected is not None
    assert got.path == got.spend_path == expected.db_path(s.home)


def test_cwd_and_project_id_resolve_as_ember_memory_does(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert served(s, None, tmp_path).ref == project_from_cli(None, str(tmp_path))
    assert served(s, "acme", None).ref == project_from_cli("acme", None)


@pytest.mark.parametrize("where", ["/", "home"])
def test_the_root_or_the_home_directory_is_no_project(tmp_path: Path, where: str) -> None:
    """Where clients that know no project start their servers: one "project" for all."""
    home = tmp_path / "me"
    home.mkdir()
    workdir = "/" if where == "/" else str(home)
    with pytest.raises(NoProjectHere, match=r"no project to serve: .*--cwd DIR"):
        served(settings(tmp_path), None, None, workdir=lambda: workdir, home_dir=lambda: home)


def test_a_deleted_working_directory_is_no_project(tmp_path: Path) -> None:
    def gone() -> str:
        raise FileNotFoundError(2, "No such file or directory")

    with pytest.raises(NoProjectHere, match="cannot be read"):
        served(settings(tmp_path), None, None, workdir=gone)


def test_a_missing_cwd_or_an_empty_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="not a directory") as typo:
        served(settings(tmp_path), None, tmp_path / "typo")
    with pytest.raises(ProjectError, match="--project-id is empty") as empty:
        served(settings(tmp_path), " ", None)
    # what the user typed wrong stops the server; only an inherited directory serves nothing
    assert not isinstance(typo.value, NoProjectHere) and not isinstance(empty.value, NoProjectHere)


def test_the_shared_store_only_when_the_user_chose_it(tmp_path: Path) -> None:
    s = settings(tmp_path, EMBER_UNRESOLVED_PROJECT="global")
    got = served(s, None, None, workdir=lambda: "/")
    assert got.ref is None
    assert got.path == s.home / "global" / "ember.db"
    assert got.spend_path == s.home / "stats.db"
