"""The soak's PostgreSQL, stopped and started again for real (``bench/pg_soak.py``).

The local throwaway server (``ember.testing.postgres``) is one ``postgres`` process; this
stops it with a fast shutdown (SIGINT: every connection cut, in-flight transactions rolled
back, as a restart or a crash-free stop does) and starts the same program again on the same
data directory, as the same user, with the same settings — read from ``/proc`` of the running
server, so nothing of the test setup is assumed. Linux only; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


class Restartable:
    """The server whose postmaster is ``pid`` (a local one: ``PgServer.pid``)."""

    def __init__(self, pid: int, data_dir: Path) -> None:
        proc = Path(f"/proc/{pid}")
        self.pid = pid
        self.data_dir = data_dir
        self.cmd = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
        self.env = dict(
            line.decode().split("=", 1)
            for line in (proc / "environ").read_bytes().split(b"\0")
            if b"=" in line
        )
        status = dict(
            line.split(":", 1) for line in (proc / "status").read_text().splitlines() if ":" in line
        )
        self.uid = int(status["Uid"].split()[0])
        self.gid = int(status["Gid"].split()[0])
        self.groups = [int(g) for g in status.get("Groups", "").split()]
        self.log = data_dir.parent / "postgres.log"
        self._started: subprocess.Popen[bytes] | None = None

    def stop(self, timeout: float = 30.0) -> float:
        """Fast shutdown; seconds it took."""
        started = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)
        deadline = started + timeout
        while _alive(self.pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres {self.pid} did not stop within {timeout:g} s")
            time.sleep(0.02)
        return time.monotonic() - started

    def start(self, timeout: float = 60.0) -> float:
        """The same server again; seconds until it is ready."""
        started = time.monotonic()
        # not under ``setpriv --pdeathsig``, as the first one was: that signal comes when
        # the *thread* that started it ends (an outage's thread ends at once); ``close``
        # stops it instead
        with self.log.open("ab") as out:
            self._started = subprocess.Popen(
                self.cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                env=self.env,
                user=self.uid,
                group=self.gid,
                extra_groups=self.groups,
            )
        self.pid = self._started.pid
        pid_file = self.data_dir / "postmaster.pid"
        while True:
            if self._started.poll() is not None:
                raise RuntimeError(
                    f"postgres exited with {self._started.returncode}; see {self.log}"
                )
            with contextlib.suppress(OSError, ValueError, IndexError):
                lines = pid_file.read_text().splitlines()
                if int(lines[0]) == self.pid and lines[7].strip() == "ready":
                    return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"postgres was not ready within {timeout:g} s; see {self.log}")
            time.sleep(0.02)

    def close(self) -> None:
        """Stop the server this started (the first one is its starter's to stop)."""
        if self._started is not None and self._started.poll() is None:
            self._started.send_signal(signal.SIGINT)
            try:
                self._started.wait(30)
            except subprocess.TimeoutExpired:
                self._started.kill()
                self._started.wait(10)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
