"""Files ember writes atomically keep their mode, and new ones follow the user's umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.fsutil import current_umask, write_bytes, write_json


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_what_the_umask_gives_not_0600(tmp_path: Path, umask_022: None) -> None:
    """Measured: `ember learn --apply` created AGENTS.md and CLAUDE.local.md 0600."""
    target = tmp_path / "AGENTS.md"
    write_bytes(target, b"# notes\n")
    assert mode(target) == 0o644 and target.read_bytes() == b"# notes\n"


def test_a_file_that_exists_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "settings.json"
    target.write_text("{}")
    target.chmod(0o600)  # a user's private settings stay private
    write_json(target, {"env": {}})
    assert mode(target) == 0o600


def test_the_umask_is_read_without_changing_it(umask_022: None) -> None:
    assert current_umask() == 0o022
    assert current_umask() == 0o022
