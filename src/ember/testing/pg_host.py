"""Whom the test PostgreSQL runs as, and from which binaries.

Invariants:

- PostgreSQL refuses to run as root. When this process is root, the server runs as the OS user
  ``ember-pg``, created here with ``useradd --system`` if it does not exist (idempotent, and a
  concurrent creation is taken as success). It is done here, not in ``scripts/test-deps``,
  because it must hold wherever a server is started — ``make test``, CI, a developer running
  pytest or a bench directly — and only then; ``useradd`` is in Debian's required ``passwd``
  package, so nothing needs installing. Not root: the server runs as the current user.
- That account can run the binaries and enter the directories, or we say so before initdb: an
  install it cannot reach (a virtualenv under ``/root``) is copied, never opened up by changing
  the modes of directories that are not ours.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ember.testing.pg_errors import NoPostgresInstall, NoUnprivilegedUser, UnreachableDirectory

OS_USER = "ember-pg"
#: A system account with its own group, no home and no login: it only owns the server's files.
_USERADD_OPTIONS: tuple[str, ...] = ("--system", "--user-group", "--no-create-home")
_USERADD_OPTIONS += ("--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin")


@dataclass(frozen=True)
class Account:
    """Whom the server runs as: ``uid``/``gid`` to switch to (None: stay as we are)."""

    name: str
    uid: int | None
    gid: int | None

    @property
    def groups(self) -> list[int] | None:
        """Supplementary groups for the child: none of ours when we switch user."""
        return None if self.uid is None else []

    def owns(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


def server_account(name: str = OS_USER) -> Account:
    """The current user when not root; else ``name``, created if missing."""
    if os.geteuid() != 0:
        return Account(pwd.getpwuid(os.geteuid()).pw_name, None, None)
    entry = _passwd(name)
    if entry is None:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise NoUnprivilegedUser(
                f"running as root, PostgreSQL needs an unprivileged OS user ({name}), and there "
                "is no useradd to create it (Debian: apt-get install passwd)"
            )
        done = subprocess.run(
            [useradd, *_USERADD_OPTIONS, name],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        entry = _passwd(name)  # created by us, or by a concurrent run (useradd then exits 9)
        if entry is None:
            raise NoUnprivilegedUser(
                f"running as root, PostgreSQL needs an unprivileged OS user, and "
                f"`useradd {name}` failed (exit {done.returncode}): {done.stderr.strip()}"
            )
    if entry.pw_uid == 0:
        raise NoUnprivilegedUser(f"OS user {name} has uid 0; PostgreSQL refuses to run as root")
    return Account(name, entry.pw_uid, entry.pw_gid)


def _passwd(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def pgserver_install() -> Path:
    """The PostgreSQL tree inside the installed ``pgserver`` wheel (found without importing
    it: its import creates lock files and checks processes)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise NoPostgresInstall(
            "pgserver is not installed; it ships PostgreSQL 16 with pgvector "
            "(pip install -e '.[dev]')"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def check_install(install: Path) -> None:
    """Raise unless ``install`` holds what a server with pgvector needs."""
    needed = [
        install / "bin" / "initdb",
        install / "bin" / "postgres",
        install / "lib" / "postgresql" / "vector.so",
        install / "share" / "postgresql" / "extension" / "vector.control",
    ]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise NoPostgresInstall(f"the PostgreSQL install at {install} lacks {', '.join(missing)}")


def usable_install(install: Path, account: Account, scratch: Path) -> Path:
    """``install``, or a copy of its server parts under ``scratch`` when ``account`` cannot
    run it from where it is (a virtualenv under a 0700 directory such as ``/root``).

    The copy keeps the wheel's layout: initdb finds its libpq at ``$ORIGIN/../../../
    pgserver.libs`` and postgres finds ``lib/`` and ``share/`` beside its ``bin/``.
    """
    problem = _cannot_run(install, account)
    if problem is None:
        return install
    libs = install.parent.parent / "pgserver.libs"
    copy = scratch / "pgserver" / "pginstall"
    for part in ("bin/initdb", "bin/postgres", "lib/postgresql", "share/postgresql"):
        source, target = install / part, copy / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
    if libs.is_dir():
        shutil.copytree(libs, scratch / "pgserver.libs", symlinks=True)
    again = _cannot_run(copy, account)
    if again is not None:
        raise NoPostgresInstall(
            f"{account.name} cannot run PostgreSQL from {install} ({problem}) "
            f"nor from a copy in {copy} ({again})"
        )
    return copy


def _cannot_run(install: Path, account: Account) -> str | None:
    """Why ``account`` cannot run this install's initdb and postgres (None: it can)."""
    for program in ("initdb", "postgres"):
        try:
            done = subprocess.run(
                [str(install / "bin" / program), "--version"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
                user=account.uid,
                group=account.gid,
                extra_groups=account.groups,
            )
        except OSError as err:
            return f"{program}: {err.strerror}"
        if done.returncode != 0:
            return f"{program} --version exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return None


def check_reachable(path: Path, account: Account) -> None:
    """Raise unless ``account`` may enter every directory above ``path`` (by mode bits)."""
    if account.uid is None:
        return
    for parent in path.resolve().parents:
        st = parent.stat()
        if st.st_uid == account.uid:
            ok = bool(st.st_mode & stat.S_IXUSR)
        elif st.st_gid == account.gid:
            ok = bool(st.st_mode & stat.S_IXGRP)
        else:
            ok = bool(st.st_mode & stat.S_IXOTH)
        if not ok:
            raise UnreachableDirectory(
                f"the server's OS user {account.name} cannot enter {parent} "
                f"(mode {stat.filemode(st.st_mode)}), which holds {path}: give a directory "
                "it can reach, or none for one in the system's temp dir"
            )
