"""The command line a client runs to start ``ember mcp``."""

from __future__ import annotations

from pathlib import Path

from ember.clients.mcp import ember_argv


def test_ember_on_path_only_when_it_is_this_install(tmp_path: Path) -> None:
    own = tmp_path / "venv" / "bin" / "ember"
    own.parent.mkdir(parents=True)
    own.write_text("#!/bin/sh\n")
    link = tmp_path / "bin" / "ember"
    link.parent.mkdir()
    link.symlink_to(own)
    assert ember_argv(str(link), own, "/py") == ["ember", "mcp"]
    other = tmp_path / "other-ember"
    other.write_text("")
    assert ember_argv(str(other), own, "/py") == [str(own), "mcp"]
    assert ember_argv(None, own, "/py") == [str(own), "mcp"]


def test_without_a_script_the_interpreter_runs_the_package(tmp_path: Path) -> None:
    assert ember_argv(None, tmp_path / "missing", "/py") == ["/py", "-m", "ember", "mcp"]
