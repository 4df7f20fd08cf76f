"""A throwaway local PostgreSQL process, from the binaries the ``pgserver`` wheel ships.

Invariants, each against a failure seen or sure to come:

- It runs as the account :mod:`.pg_host` gives (never root: PostgreSQL refuses it), from an
  install that account can run, in a directory it can enter, all checked before initdb.
- pgserver's own ``PostgresServer`` is not used: as root it makes every parent of the data
  directory world-traversable (``/root`` included), its wait for readiness after ``pg_ctl``
  has no bound, and it registers ``atexit`` hooks and a per-user lock file. Only its binaries
  are.
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
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ember.testing.pg_errors import InitdbFailed, ServerStartFailed
from ember.testing.pg_host import (
    OS_USER,
    Account,
    check_install,
    check_reachable,
    pgserver_install,
    server_account,
    usable_install,
)

#: The database superuser initdb creates (a PostgreSQL role, not an OS user).
SUPERUSER = "ember"
#: Settings for a server whose data is thrown away: durability off (a crash loses nothing we
#: keep), small memory, no autovacuum (a test's plans and timings never depend on when it last
#: ran: tests ANALYZE what they need); passed on the command line, so the data directory stays
#: initdb's own.
SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "max_connections": "40",
    "max_wal_size": "256MB",
    "autovacuum": "off",
}
#: AF_UNIX paths are limited to 108 bytes on Linux (with the terminating NUL).
_SOCKET_PATH_MAX = 100
_SOCKET_NAME = ".s.PGSQL.5432"


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
