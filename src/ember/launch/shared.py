"""One proxy per port, shared by every ``ember wrap`` that uses it.

A user runs two agents in two terminals: the second ``ember wrap`` finds the proxy the first one
started and uses it. If the first wrap stopped "its" proxy when its agent exited, the second
agent would lose its proxy mid-session (connection refused on its next turn). So the wraps
using a port are registered in ``$EMBER_HOME/run/wrap-<port>.json``, and the last one out hands
the proxy over to stop (``ember.launch.finish``), and only a proxy some wrap started: one the
user started themselves is never stopped. Every look-and-change happens under an exclusive
``flock`` on ``wrap-<port>.lock``, so two wraps starting at once start one proxy.

The proxy decides to stop under that lock too (``retire``), once it has finished its reads and
no wrap is registered, and holds the lock until its process ends: a wrap arriving while it
finishes uses it; one arriving as it stops waits, then starts a new proxy on the free port.

A wrap killed with SIGKILL leaves its pid behind; dead pids are dropped on every visit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ember.clients.address import ProxyAddress
from ember.errors import ClientError
from ember.fsutil import PRIVATE_FILE, open_private, private_dirs
from ember.launch import finish, proxyproc
from ember.launch.probe import probe, settle

LOCK_TIMEOUT = 60.0  #: seconds to wait for another wrap that is starting or stopping a proxy
#: Seconds the proxy may take to answer the last wrap's ask (it answers at once: how many
#: sessions it is still reading); past it, the proxy is taken for wedged and stopped.
ANSWER_TIMEOUT = 10.0


@dataclass
class _State:
    proxy_pid: int | None = None  #: the proxy a wrap started; None: none, or the user's own
    users: list[int] = field(default_factory=list)  #: pids of the wraps using the port


@dataclass
class Lease:
    """This wrap's use of the proxy; ``started`` when this very wrap started it."""

    started: bool
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None


@dataclass(frozen=True)
class Released:
    """What became of the proxy when a wrap let go of it."""

    stopped: bool = False  #: it is gone
    reading: int = 0  #: it finishes this many sessions' reads in the background, then stops
    seconds: float = 0.0  #: ... for up to this long


class SharedProxy:
    def __init__(self, run_dir: Path, host: str, address: ProxyAddress) -> None:
        self.run_dir = run_dir
        self.host = host  #: what the proxy binds (may be a wildcard)
        self.address = address  #: what clients dial
        self.log_path = run_dir / f"proxy-{address.port}.log"
        self._state_path = run_dir / f"wrap-{address.port}.json"
        self._lock_path = run_dir / f"wrap-{address.port}.lock"

    def acquire(self, config_file: Path | None, timeout: float) -> Lease:
        """Use the ember proxy answering on the port, or start one; raise ``ClientError``
        when the port is held by something that is not ember."""
        with self._locked():
            state = self._load()
            found = settle(self.address.host, self.address.port, timeout)
            if found.state == "other":
                raise ClientError(
                    f"{self.address.origin} is taken by something that is not an ember proxy "
                    f"({found.detail}). Stop it, or run ember on another port: --port N or "
                    "EMBER_PORT"
                )
            if found.state == "starting":
                raise ClientError(
                    f"the ember proxy on {self.address.origin} has been starting for "
                    f"{timeout:.0f} s and does not serve yet; see {self.log_path}"
                )
            lease = Lease(started=found.state == "free", log_path=self.log_path)
            if lease.started:
                proc = proxyproc.start(self.host, self.address.port, config_file, self.log_path)
                try:
                    proxyproc.wait_ready(proc, self.address, self.log_path, timeout)
                except BaseException:  # Ctrl-C while waiting included: leave no proxy behind
                    proxyproc.stop(proc.pid, proc)
                    raise
                lease.proc = proc
                state.proxy_pid = proc.pid  # wraps still registered keep their place
            state.users.append(os.getpid())
            self._save(state)
            return lease

    def release(self, lease: Lease, on_slow: Callable[[], None] | None = None) -> Released:
        """Drop this wrap. The last one out of a proxy a wrap started asks it to finish and
        stop (``ember.launch.finish``): it returns at once when the proxy still reads sessions
        in the background, waits for it to go when it stops now. ``on_slow``: see
        ``proxyproc.stop``, for a proxy that does not answer."""
        with self._locked():
            state = self._load()
            state.users = [pid for pid in state.users if pid != os.getpid()]
            if state.users or state.proxy_pid is None:
                self._save(state)
                return Released()
            pid = state.proxy_pid
            mine = lease.proc if lease.proc is not None and lease.proc.pid == pid else None
            # Nothing on the port: the recorded proxy died and its pid may belong to another
            # process by now, which must not get our signal.
            if probe(self.address.host, self.address.port).state == "free":
                self._save(_State())
                return Released(stopped=True)
            asked = finish.ask(self.run_dir, self.address.port)
            try:
                os.kill(pid, finish.SIGNAL)
            except ProcessLookupError:
                self._save(_State())
                return Released(stopped=True)
            self._save(state)  # still the wraps' proxy: a wrap coming now uses it
        try:
            found = finish.wait(asked, pid, ANSWER_TIMEOUT)
        except KeyboardInterrupt:  # the user will not wait: the proxy goes on by itself
            return Released()
        if found is None:
            return self._unanswered(pid, mine, on_slow)
        if found.state == "finishing":
            return Released(reading=found.reading, seconds=found.seconds)
        if found.state == "stopping":
            proxyproc.wait_stopped(pid, mine)
            return Released(stopped=True)
        return Released()  # a wrap came meanwhile: the proxy stays theirs

    def _unanswered(
        self, pid: int, proc: subprocess.Popen[bytes] | None, on_slow: Callable[[], None] | None
    ) -> Released:
        """The proxy gave no answer: gone, or wedged; a wedged one is stopped unless a wrap
        uses it by now."""
        with self._locked():
            state = self._load()
            if state.users:
                return Released()
            if state.proxy_pid == pid:  # (``_load`` forgets a proxy that died)
                proxyproc.stop(pid, proc, on_slow)
                self._save(_State())
            return Released(stopped=True)

    def retire(self, pid: int, gave_up: Callable[[], bool]) -> IO[bytes] | None:
        """The proxy's side: whether it may stop now. Yes when a wrap started it (``pid`` is
        the recorded proxy) and no wrap uses it: the registry is cleared and the lock comes
        back held — keep it open until the process ends, so no wrap takes the stopping proxy
        for a live one. None: it stays (a wrap uses it, or the user started it). Waits for
        the lock until ``gave_up`` says the proxy is stopping anyway."""
        private_dirs(self.run_dir)
        handle = _open_lock(self._lock_path)
        try:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if gave_up():
                        handle.close()
                        return None
                    time.sleep(0.05)
            state = self._load()
            if state.users or state.proxy_pid != pid:
                handle.close()  # unlocks
                return None
            self._save(_State())
            return handle
        except BaseException:
            handle.close()
            raise

    def _load(self) -> _State:
        """The registry without dead wraps, and without a recorded proxy that has died."""
        try:
            raw = json.loads(self._state_path.read_text())
            state = _State(raw.get("proxy_pid"), [int(p) for p in raw.get("users", [])])
        except (OSError, ValueError, TypeError, AttributeError):
            state = _State()
        state.users = [pid for pid in state.users if proxyproc.alive(pid)]
        if state.proxy_pid is not None and not proxyproc.alive(state.proxy_pid):
            state.proxy_pid = None
        return state

    def _save(self, state: _State) -> None:
        tmp = self._state_path.with_suffix(".tmp")
        with open(open_private(tmp, os.O_WRONLY | os.O_TRUNC), "w") as out:
            out.write(json.dumps({"proxy_pid": state.proxy_pid, "users": state.users}))
        os.chmod(tmp, PRIVATE_FILE)  # a .tmp left by an older ember keeps its mode else
        os.replace(tmp, self._state_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dirs(self.run_dir)
        with _open_lock(self._lock_path) as handle:
            _flock(handle.fileno(), LOCK_TIMEOUT, self._lock_path)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _open_lock(path: Path) -> IO[bytes]:
    """The lock file, created 0600 (as everything under ``EMBER_HOME``)."""
    return open(open_private(path, os.O_RDWR | os.O_APPEND), "a+b")


def _flock(fd: int, timeout: float, path: Path) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ClientError(
                    f"another ember wrap has held {path} for {timeout:.0f} s (starting or "
                    "stopping the proxy); try again, or remove the file if no ember runs"
                ) from None
            time.sleep(0.05)
