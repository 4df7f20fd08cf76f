"""A command ember prints for the user to run names an ember the user can run from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.cmdkit.invocation import ember_command


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout with ember installed in its ``.venv``, which is not on PATH."""
    bin_dir = tmp_path / "repo" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("ember", "python"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    return tmp_path / "repo"


def test_the_venvs_ember_is_named_by_its_path_when_not_on_path(checkout: Path) -> None:
    python = str(checkout / ".venv/bin/python")
    assert ember_command(".venv/bin/ember", python, str(checkout)) == ".venv/bin/ember"
    # from a sub-directory of the checkout, or from outside it
    sub = checkout / "src"
    sub.mkdir()
    assert ember_command(str(checkout / ".venv/bin/ember"), python, str(sub)) == str(
        checkout / ".venv/bin/ember"
    )


def test_python_dash_m_ember_names_the_venvs_script(checkout: Path) -> None:
    python = str(checkout / ".venv/bin/python")
    assert ember_command("/x/ember/__main__.py", python, str(checkout)) == ".venv/bin/ember"


def test_without_a_script_it_is_python_dash_m_ember(tmp_path: Path) -> None:
    python = tmp_path / "py" / "python3"
    python.parent.mkdir()
    python.write_text("")
    assert ember_command("-c", str(python), str(tmp_path)) == "py/python3 -m ember"


def test_the_ember_on_path_is_just_ember(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(checkout / ".venv/bin"))
    python = str(checkout / ".venv/bin/python")
    assert ember_command(".venv/bin/ember", python, str(checkout)) == "ember"
    assert ember_command("ember", python, "/") == "ember"


def test_a_path_with_a_space_is_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    script = tmp_path / "my tools" / "ember"
    script.parent.mkdir()
    script.write_text("")
    assert ember_command(str(script), "/usr/bin/python3", str(tmp_path / "elsewhere")) == (
        f"'{script}'"
    )
