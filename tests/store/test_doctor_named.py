"""Every error about ember's own files names ``ember doctor`` as the next step, as the README
promises ("When something is wrong"): each message a failing home, folder or database can
produce, for the proxy (its log line, ``/healthz``) and for a one-shot command alike.

Walked through the constructors themselves, each failure made to happen (a permission or a
full disk simulated where root would pass every check), so a new message without the doctor
fails here."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest

from ember.cmdkit import access
from ember.errors import StorageError
from ember.store import home as home_mod
from ember.store.health import Health, State
from ember.store.home import check_folders, check_home, check_readable, check_writable

FAILED = [s for s in get_args(State) if s != "ok"]


def names_the_doctor(message: str) -> None:
    assert "`ember doctor" in message, message


@pytest.mark.parametrize("state", FAILED)
def test_a_database_the_proxy_switched_off_says_run_ember_doctor(state: State) -> None:
    names_the_doctor(Health("/h/projects/p/ember.db", state, "disk I/O error").describe())


@pytest.mark.parametrize("state", FAILED)
def test_a_database_a_command_cannot_use_says_run_ember_doctor(state: State) -> None:
    health = Health("/h/projects/p/ember.db", state, "disk I/O error")
    error = access._reworded(RuntimeError("opaque"), health.path, health)
    assert error is not None
    names_the_doctor(str(error))


def _raising(code: int) -> Callable[..., Any]:
    def fail(*args: object, **kw: object) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


def _broken_homes(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[], Any]]:
    """Each way a home, a folder in it or a database file can be unusable, as the check that
    finds it."""
    a_file = tmp / "file-home"
    a_file.write_text("x")
    folder_is_file = tmp / "h1"
    (folder_is_file / "projects").parent.mkdir()
    (folder_is_file / "projects").write_text("x")
    db_is_dir = tmp / "h2"
    (db_is_dir / "projects" / "p" / "ember.db").mkdir(parents=True)
    not_sqlite = tmp / "h3" / "projects" / "p" / "ember.db"
    not_sqlite.parent.mkdir(parents=True)
    not_sqlite.write_bytes(b"garbage" * 10)
    good = tmp / "h4"
    good.mkdir()

    def probe_fails(code: int) -> Callable[[], Any]:
        def run() -> Any:
            monkeypatch.setattr(home_mod.tempfile, "mkstemp", _raising(code))
            return check_home(good)

        return run

    def unreadable_db() -> Any:
        monkeypatch.setattr(Path, "open", _raising(errno.EACCES))
        return check_readable(tmp / "h3", not_sqlite)

    return {
        "home is a file": lambda: check_home(a_file),
        "home under a file": lambda: check_home(a_file / "home"),
        "home read-only": probe_fails(errno.EROFS),
        "home on a full disk": probe_fails(errno.ENOSPC),
        "home not writable": probe_fails(errno.EACCES),
        "home nearly full": lambda: check_home(good, min_free=1 << 62),
        "a folder is a file (read)": lambda: check_folders(folder_is_file, folder_is_file
                                                           / "projects" / "p" / "ember.db"),
        "a folder is a file (write)": lambda: check_writable(folder_is_file, folder_is_file
                                                             / "projects" / "p" / "ember.db"),
        "home is a file (read)": lambda: check_folders(a_file, a_file / "stats.db"),
        "database is a folder": lambda: check_readable(db_is_dir,
                                                       db_is_dir / "projects/p/ember.db"),
        "database is not SQLite": lambda: check_readable(tmp / "h3", not_sqlite),
        "database unreadable": unreadable_db,
    }  # fmt: skip


CASES = [
    "home is a file",
    "home under a file",
    "home read-only",
    "home on a full disk",
    "home not writable",
    "home nearly full",
    "a folder is a file (read)",
    "a folder is a file (write)",
    "home is a file (read)",
    "database is a folder",
    "database is not SQLite",
    "database unreadable",
]


@pytest.mark.parametrize("case", CASES)
def test_a_home_or_file_that_cannot_be_used_says_run_ember_doctor(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _broken_homes(tmp_path, monkeypatch)[case]
    with pytest.raises(StorageError) as caught:
        check()
    names_the_doctor(str(caught.value))


def test_every_case_is_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sorted(_broken_homes(tmp_path, monkeypatch)) == sorted(CASES)


def test_a_file_system_failure_no_check_foresaw_names_the_doctor() -> None:
    names_the_doctor(home_mod.describe_os_error(OSError(errno.EIO, "I/O error", "/h/x.json")))
