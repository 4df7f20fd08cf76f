"""A checkout is named by its remote on every machine (``project_identity = "git-remote"``):
clones at different paths, by ssh or by https, in a worktree or a subdirectory, are one
project; a directory outside git, or without a remote, keeps its path; no credential in a
remote URL ever reaches the name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ember.gitremote import normalized, remote_of
from ember.project import resolve_project


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/api.git",
        "https://github.com/Acme/api",
        "https://alice:s3cret-token@GitHub.com/Acme/api.git/",
        "ssh://git@github.com:22/Acme/api.git",
        "git://github.com/Acme/api.git",
    ],
)
def test_every_spelling_of_one_remote_is_one_name(url: str) -> None:
    assert normalized(url) == "github.com/Acme/api"


def test_a_local_path_or_an_empty_url_names_no_host() -> None:
    assert normalized("/srv/git/api.git") is None
    assert normalized("../api") is None
    assert normalized("") is None


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _clone(where: Path, url: str) -> Path:
    where.mkdir(parents=True)
    _git("init", "-q", cwd=where)
    _git("remote", "add", "origin", url, cwd=where)
    return where


def test_two_clones_at_different_paths_are_one_project(tmp_path: Path) -> None:
    alice = _clone(tmp_path / "home" / "alice" / "acme", "git@github.com:Acme/api.git")
    bob = _clone(tmp_path / "Users" / "bob" / "src" / "api", "https://github.com/Acme/api")
    (bob / "pkg" / "sub").mkdir(parents=True)
    refs = [
        resolve_project({"x-ember-cwd": str(alice)}, identity="git-remote"),
        resolve_project({}, None, f"Working directory: {bob / 'pkg' / 'sub'}", (), "git-remote"),
    ]
    assert [r.identity for r in refs if r] == ["github.com/Acme/api"] * 2
    assert refs[0] is not None and refs[1] is not None
    assert refs[0].source == "git-remote" and refs[0].dir_name == refs[1].dir_name
    assert refs[0].dir_name.startswith("api-")
    by_path = resolve_project({"x-ember-cwd": str(alice)})  # the default: the path
    assert by_path is not None and by_path.identity == str(alice)


def test_a_worktree_is_named_by_its_repositorys_remote(tmp_path: Path) -> None:
    main = _clone(tmp_path / "acme", "git@github.com:Acme/api.git")
    _git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty",
         "-m", "init", cwd=main)  # fmt: skip
    _git("worktree", "add", "-q", str(tmp_path / "feature"), cwd=main)
    assert remote_of(str(tmp_path / "feature")) == "github.com/Acme/api"


def test_outside_git_or_without_a_remote_the_path_stays(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    _git("init", "-q", cwd=lonely)
    for where in (plain, lonely, tmp_path / "gone"):
        ref = resolve_project({"x-ember-cwd": str(where)}, identity="git-remote")
        assert ref is not None and ref.identity == str(where) and ref.source != "git-remote"
    chosen = resolve_project({"x-ember-project-id": "acme"}, identity="git-remote")
    assert chosen is not None and chosen.identity == "acme"  # an id the user chose wins
