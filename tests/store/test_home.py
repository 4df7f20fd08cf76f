"""`ember proxy` refuses a home it cannot use, in one line, before serving anything."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ember.errors import StorageError
from ember.store import home as home_mod
from ember.store.home import check_home


def _proxy(home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "ember", "proxy", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_home_that_is_a_file_is_refused_in_one_line_without_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("oops")
    done = _proxy(home)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "is a file, not a directory" in lines[0]


def test_a_home_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StorageError, match=r"cannot be created.*parent of it is a file"):
        check_home(tmp_path / "f" / "home")


def _failing_mkstemp(code: int) -> Any:
    def mkstemp(*args: object, **kw: object) -> tuple[int, str]:
        raise OSError(code, os.strerror(code))

    return mkstemp


def test_a_read_only_home_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root every permission check passes, so the read-only mount is simulated at the probe.
    monkeypatch.setattr(home_mod.tempfile, "mkstemp", _failing_mkstemp(errno.EROFS))
    with pytest.raises(StorageError, match=r"not writable.*read-only file system"):
        check_home(tmp_path)


def test_a_full_disk_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(home_mod.tempfile, "mkstemp", _failing_mkstemp(errno.ENOSPC))
    with pytest.raises(StorageError, match="free some space"):
        check_home(tmp_path)


def test_a_nearly_full_disk_is_refused_before_sqlite_runs_out(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="MB free"):
        check_home(tmp_path, min_free=1 << 62)


def test_a_good_home_passes_and_leaves_no_probe_file(tmp_path: Path) -> None:
    check_home(tmp_path / "new" / "home")
    assert list((tmp_path / "new" / "home").iterdir()) == []
