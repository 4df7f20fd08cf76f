"""An existing ``EMBER_HOME`` made private: the group's and others' bits taken off every folder
and file that is ours, links and other users' files left alone, one line saying what changed."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ember.store.private import Tightened, keep_private, said, tighten


def _open_home(root: Path) -> Path:
    home = root / "home"
    (home / "projects" / "acme-1").mkdir(parents=True)
    (home / "projects" / "acme-1" / "ember.db").write_bytes(b"transcripts")
    (home / "stats.db").write_bytes(b"rows")
    (home / "tool.sh").write_bytes(b"#!/bin/sh\n")
    (home / "tool.sh").chmod(0o755)
    for folder in (home, home / "projects", home / "projects" / "acme-1"):
        folder.chmod(0o755)
    for name in ("stats.db", "projects/acme-1/ember.db"):
        (home / name).chmod(0o644)
    return home


def test_every_folder_and_file_loses_the_group_and_other_bits(tmp_path: Path) -> None:
    home = _open_home(tmp_path)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not ember's")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    assert tighten(home) == Tightened(folders=3, files=3)
    modes = {str(p.relative_to(home)): p.lstat().st_mode & 0o777 for p in home.rglob("*")}
    assert modes.pop("link") == 0o777  # a link's own mode; what it points at is not ours
    assert modes == {
        "projects": 0o700,
        "projects/acme-1": 0o700,
        "projects/acme-1/ember.db": 0o600,
        "stats.db": 0o600,
        "tool.sh": 0o700,  # the owner keeps what it had
    }
    assert home.stat().st_mode & 0o777 == 0o700
    assert outside.stat().st_mode & 0o777 == 0o644
    assert tighten(home) == Tightened()  # the second time: nothing to do


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_user_is_left_and_said(tmp_path: Path) -> None:
    home = _open_home(tmp_path)
    os.chown(home / "stats.db", 65534, 65534)
    found = tighten(home)
    assert (found.files, found.not_ours) == (2, 1)
    assert (home / "stats.db").stat().st_mode & 0o777 == 0o644
    assert said(found, home) == (
        f"ember: made 3 folders and 2 files under {home} private to you (they were readable "
        "by other users); left 1 file of another user as they are"
    )


def test_the_line_is_said_once_per_process_and_never_for_a_private_home(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = _open_home(tmp_path)
    with caplog.at_level(logging.INFO, logger="ember.store.private"):
        keep_private(home)
        (home / "stats.db").chmod(0o644)  # changed again meanwhile: not looked at again
        keep_private(home)
    assert [r.getMessage() for r in caplog.records] == [
        f"ember: made 3 folders and 3 files under {home} private to you (they were readable "
        "by other users)"
    ]
    assert said(Tightened(), home) is None
