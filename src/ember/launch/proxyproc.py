"""Start ``ember proxy`` in the background for ``ember wrap``, wait until it serves, stop it.

The proxy runs in a session of its own: the Ctrl-C a user types at the agent reaches the agent
(whose job it is to interrupt a turn), not the proxy under it, and the proxy can outlive the
``ember wrap`` that started it while another wrap still uses it, or while it finishes reading
sessions after the last one exited. Its output goes to a log file, never the terminal, where it
would scribble over the agent's screen: appended to, each start marked by a line, and rotated by
the proxy itself (``ember.logs``), so the log of the run before is still there to read. The log
is private to the user (0600 in a 0700 folder), as everything under ``EMBER_HOME``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ember.clients.address import ProxyAddress
from ember.errors import ClientError
from ember.fsutil import open_private, private_dirs
from ember.launch.probe import probe

READY_TIMEOUT = 30.0  #: seconds a new proxy may take to serve ``/healthz``
STOP_TIMEOUT = 20.0  #: seconds a stopping proxy may take to flush before it is killed
#: A proxy still stopping after this long is reading unread sessions while the provider's
#: cache is hot (``shadow_stop_seconds``): the user is told why they wait, and how to skip it.
SLOW_STOP_NOTICE = 0.5
_LOG_TAIL_LINES = 12
_TAIL_BYTES = 64 * 1024


def start(
    host: str, port: int, config_file: Path | None, log_path: Path
) -> subprocess.Popen[bytes]:
    """``python -m ember proxy`` with the user's environment and ``--config``, detached."""
    argv = [sys.executable, "-m", "ember", "proxy", "--host", host, "--port", str(port)]
    argv += ["--log-file", str(log_path)]
    if config_file is not None:
        argv += ["--config", str(config_file)]
    private_dirs(log_path.parent)
    with open(open_private(log_path, os.O_WRONLY | os.O_APPEND), "ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"--- {stamp} ember wrap starts the proxy on port {port}\n".encode())
        log.flush()
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )


def wait_ready(
    proc: subprocess.Popen[bytes], address: ProxyAddress, log_path: Path, timeout: float
) -> None:
    """Return once the proxy serves; otherwise raise ``ClientError`` with the end of its log,
    which says why (a bad setting, a port taken meanwhile, an unusable home)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise ClientError(
                f"the ember proxy did not start (exit status {code}); its last lines "
                f"({log_path}):\n{tail(log_path)}"
            )
        state = probe(address.host, address.port, timeout=1.0).state
        if state == "ember":
            return
        time.sleep(0.05)
    raise ClientError(
        f"the ember proxy did not answer on {address.origin} within {timeout:.0f} s; its last "
        f"lines ({log_path}):\n{tail(log_path)}"
    )


def stop(
    pid: int,
    proc: subprocess.Popen[bytes] | None = None,
    on_slow: Callable[[], None] | None = None,
) -> None:
    """SIGTERM (the proxy finishes what it accepted, reads unread sessions for a few seconds
    and flushes its databases), wait up to ``STOP_TIMEOUT``, then SIGKILL. ``on_slow`` is
    called once when that takes longer than ``SLOW_STOP_NOTICE``; a Ctrl-C meanwhile sends the
    proxy SIGINT, which skips the reading (its databases are still flushed). ``proc`` is given
    when the proxy is our own child, so it is reaped; otherwise the pid is watched."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        if _wait_gone(pid, proc, SLOW_STOP_NOTICE):
            return
        if on_slow is not None:
            on_slow()
        gone = _wait_gone(pid, proc, STOP_TIMEOUT)
    except KeyboardInterrupt:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        gone = _wait_gone(pid, proc, STOP_TIMEOUT)
    if gone:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, proc, 5.0)


def wait_stopped(pid: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait for a proxy that is stopping by itself; one still there after ``STOP_TIMEOUT``
    is stopped (``stop``)."""
    if not _wait_gone(pid, proc, STOP_TIMEOUT):
        stop(pid, proc)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, dead but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (macOS): trust kill(0)
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """The log's last non-empty lines (read from its last 64 KiB: the log is appended to)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - _TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "  (no log)"
    last = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("  " + line for line in last) or "  (empty log)"


def _wait_gone(pid: int, proc: subprocess.Popen[bytes] | None, timeout: float) -> bool:
    if proc is not None:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False
