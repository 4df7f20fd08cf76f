"""A throwaway local PostgreSQL process, from the binaries the ``pgserver`` wheel ships.

Invariants, each against a failure seen or sure to come:

- PostgreSQL refuses to run as root. When this process is root, initdb and postgres run as the
  OS user ``ember-pg``, created here with ``useradd --system`` if it does not exist (idempotent,
  and a concurrent creation is taken as success). It is done here, not in ``scripts/test-deps``,
  because it must hold wherever a server is started — ``make test``, CI, a developer running
  pytest or a bench directly — and only then; ``useradd`` is in Debian's required ``passwd``
  package, so nothing needs installing. Not root: the server runs as the current user.
- pgserver's own ``PostgresServer`` is not used: as root it makes every parent of the data
  directory world-traversable (``/root`` included), its readiness loop has no bound and it
  registers ``atexit`` hooks and a per-user lock file. Only its binaries are.
- The server opens no TCP port: it listens on a unix socket in a private directory (0700, owned
  by the server's user), so its trust authentication admits no other local user and two runs
  on one machine never compete for a port.
- Every wait is bounded (initdb, readiness, each stop signal); a server that is not ready in
  time is stopped before the error is raised, never left running.
- Where ``setpriv`` exists (util-linux), the server gets SIGINT (fast shutdown) when the thread
  that started it exits, so a test run killed outright leaves no postgres behind. Start the
  server from a thread that outlives its use (pytest's main thread does).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ember.testing.pg_errors import (
    InitdbFailed,
    NoPostgresInstall,
    NoUnprivilegedUser,
    ServerStartFailed,
    UnreachableDirectory,
)

OS_USER = "ember-pg"
#: The database superuser initdb creates (a PostgreSQL role, not an OS user).
SUPERUSER = "ember"
#: Settings for a server whose data is thrown away: durability off (a crash loses nothing we
#: keep), small memory; passed on the command line, so the data directory stays initdb's own.
SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "max_connections": "40",
    "max_wal_size": "256MB",
}
#: A system account with its own group, no home and no login: it only owns the server's files.
_USERADD_OPTIONS: tuple[str, ...] = ("--system", "--user-group", "--no-create-home")
_USERADD_OPTIONS += ("--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin")
#: AF_UNIX paths are limited to 108 bytes on Linux (with the terminating NUL).
_SOCKET_PATH_MAX = 100
_SOCKET_NAME = ".s.PGSQL.5432"


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


@dataclass(frozen=True)
class LocalServer:
    """A started postgres: its process, where its files are and whom it runs as."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    socket_dir: Path
    log: Path
    account: Account

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def local_server(
    run_dir: Path,
    *,
    install: Path | None = None,
    os_user: str = OS_USER,
    start_timeout: float = 30.0,
    stop_timeout: float = 15.0,
) -> Iterator[LocalServer]:
    """initdb and start a server whose files all live in ``run_dir`` (which must exist and be
    empty); stop it on exit, however the block ends. Removing ``run_dir`` is the caller's."""
    install = pgserver_install() if install is None else install
    check_install(install)
    account = server_account(os_user)
    check_reachable(run_dir, account)
    run_dir.chmod(0o711)  # the server's user enters; nobody lists
    install = usable_install(install, account, run_dir / "install")
    data_dir = run_dir / "data"
    data_dir.mkdir(mode=0o700)
    account.owns(data_dir)
    _initdb(install, data_dir, account)
    socket_dir = _socket_dir(run_dir, account)
    try:
        log = run_dir / "postgres.log"
        process = _spawn(install, data_dir, socket_dir, log, account)
        server = LocalServer(process, data_dir, socket_dir, log, account)
        try:
            _wait_ready(server, start_timeout)
            yield server
        finally:
            stop(process, stop_timeout)
    finally:
        if socket_dir.parent != run_dir:
            shutil.rmtree(socket_dir, ignore_errors=True)


def _initdb(install: Path, data_dir: Path, account: Account) -> None:
    cmd = [str(install / "bin" / "initdb"), "-D", str(data_dir), "-U", SUPERUSER]
    cmd += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"]
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=data_dir,
            env=_server_env(),
            user=account.uid,
            group=account.gid,
            extra_groups=account.groups,
        )
    except subprocess.TimeoutExpired as err:
        raise InitdbFailed(f"initdb did not finish within {err.timeout:g} s") from err
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-1500:]
        raise InitdbFailed(f"initdb failed (exit {done.returncode}) as {account.name}:\n{tail}")


def _socket_dir(run_dir: Path, account: Account) -> Path:
    """A private directory for the socket: in ``run_dir`` when the path fits AF_UNIX's limit,
    else a short one in the system's temp dir."""
    here = run_dir / "sock"
    if len(str(here / _SOCKET_NAME).encode()) <= _SOCKET_PATH_MAX:
        here.mkdir(mode=0o700)
    else:
        here = Path(tempfile.mkdtemp(prefix="ember-pg-sock-"))
    account.owns(here)
    return here


def _server_env() -> dict[str, str]:
    """Our environment without libpq's and the server's PG* variables (a PGDATA or PGPORT
    of the user's must not steer a throwaway server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def _spawn(
    install: Path, data_dir: Path, socket_dir: Path, log: Path, account: Account
) -> subprocess.Popen[bytes]:
    cmd = [str(install / "bin" / "postgres"), "-D", str(data_dir)]
    cmd += ["-c", f"unix_socket_directories={socket_dir}"]
    for name, value in SETTINGS.items():
        cmd += ["-c", f"{name}={value}"]
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        cmd = [setpriv, "--pdeathsig", "INT", "--", *cmd]
    with log.open("wb") as out:
        try:
            return subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                env=_server_env(),
                user=account.uid,
                group=account.gid,
                extra_groups=account.groups,
            )
        except OSError as err:
            raise ServerStartFailed(f"cannot run {cmd[0]}: {err}") from err


def _wait_ready(server: LocalServer, timeout: float) -> None:
    """Until postmaster.pid says ``ready`` for this very process; bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    pid_file = server.data_dir / "postmaster.pid"
    while True:
        code = server.process.poll()
        if code is not None:
            raise ServerStartFailed(
                f"postgres exited with status {code} before it was ready; {_log_tail(server)}"
            )
        with contextlib.suppress(OSError, ValueError, IndexError):
            lines = pid_file.read_text().splitlines()
            if int(lines[0]) == server.pid and lines[7].strip() == "ready":
                return
        if time.monotonic() >= deadline:
            raise ServerStartFailed(
                f"postgres (pid {server.pid}) was not ready within {timeout:g} s; "
                f"{_log_tail(server)}"
            )
        time.sleep(0.01)


def _log_tail(server: LocalServer) -> str:
    try:
        text = server.log.read_text(errors="replace").strip()
    except OSError as err:
        return f"its log {server.log} cannot be read ({err.strerror})"
    return f"its log ends:\n{text[-1500:]}" if text else "its log is empty"


def stop(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Stop postgres: fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL, each
    wait bounded; reaps the process, so its pid is free once this returns."""
    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait)
    if process.poll() is None:
        raise RuntimeError(f"postgres pid {process.pid} survived SIGKILL for 5 s")
