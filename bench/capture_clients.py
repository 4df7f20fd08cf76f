"""The processes ``bench/shadow_capture.py`` runs: the real agent CLIs, the provider emulator,
``ember proxy`` and ``ember wrap``, each bounded by a deadline and stopped by its own pid.

* ``install_clients``: Claude Code and Codex from npm into a directory (or reused ``--npm``).
* ``client_env`` / ``codex_config`` / ``claude_state``: a fresh client HOME as a new user has it,
  offline (telemetry, update checks and analytics off: nothing may leave loopback).
* ``run_bounded``: one client command, killed (its whole process group) past its timeout.
* ``drive_tui``: the interactive Claude Code TUI in a pty, prompts typed, then ``/exit``.
* ``start_upstream``: ``python -m ember dev upstream``, with ``--log FILE`` when its ``--help``
  lists it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

CLAUDE_VERSION = "2.1.197"
CODEX_VERSION = "0.171.0"
API_KEY = "sk-test"
#: Variables a user's shell may hold that would change what the clients or ember do.
_SCRUBBED = ("EMBER_", "ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_")
_STOP_SECONDS = 25.0  # ember wrap waits up to 20 s for its proxy to flush


@dataclass(frozen=True)
class Clients:
    bin_dir: Path  # node_modules/.bin, put first on PATH as a user's install would be

    @property
    def claude(self) -> Path:
        return self.bin_dir / "claude"

    @property
    def codex(self) -> Path:
        return self.bin_dir / "codex"


@dataclass(frozen=True)
class Ran:
    """One client command: exit status (None: killed at its timeout), seconds, output tail."""

    argv: tuple[str, ...]
    code: int | None
    seconds: float
    tail: str


def install_clients(npm: Path | None, into: Path, timeout: float) -> Clients | None:
    """Both CLIs from ``npm`` (a prefix already holding them) or freshly installed under
    ``into``; None when npm is needed and missing."""
    if npm is not None:
        clients = Clients(npm.absolute() / "node_modules" / ".bin")
        if not (clients.claude.exists() and clients.codex.exists()):
            raise SystemExit(f"{npm}: no node_modules/.bin/claude and codex there")
        return clients
    if shutil.which("npm") is None:
        return None
    into.mkdir(parents=True, exist_ok=True)
    argv = [
        "npm",
        "install",
        "--prefix",
        str(into),
        f"@anthropic-ai/claude-code@{CLAUDE_VERSION}",
        f"@openai/codex@{CODEX_VERSION}",
    ]
    ran = run_bounded(argv, into, dict(os.environ), timeout)
    if ran.code != 0:
        raise SystemExit(f"npm install failed ({ran.code}):\n{ran.tail}")
    return Clients(into / "node_modules" / ".bin")


def client_env(
    home: Path, ember_home: Path, port: int, upstream: str, clients: Clients
) -> dict[str, str]:
    """The environment of one scenario: the user's own minus any ember/provider/client
    setting, plus a fresh HOME, EMBER_HOME, EMBER_PORT, the upstream URLs and test keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED)}
    env.update(
        HOME=str(home),
        TERM="xterm-256color",
        PATH=f"{clients.bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
        + env.get("PATH", ""),
        EMBER_HOME=str(ember_home),
        EMBER_PORT=str(port),
        EMBER_ANTHROPIC_URL=upstream,
        EMBER_OPENAI_URL=upstream + "/v1",
        ANTHROPIC_API_KEY=API_KEY,
        OPENAI_API_KEY=API_KEY,
        # offline: no telemetry, no update check, no other host than loopback
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def codex_config(model: str | None, proxy_url: str | None) -> str:
    """``~/.codex/config.toml``: update check and analytics off (offline), the model line when
    given, and with ``proxy_url`` a provider at that ember proxy over HTTP only."""
    text = f'model = "{model}"\n' if model else ""
    if proxy_url:
        text += 'model_provider = "ember"\n'
    text += "check_for_update_on_startup = false\n\n"
    if proxy_url:
        text += (
            '[model_providers.ember]\nname = "Ember"\n'
            f'base_url = "{proxy_url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\nsupports_websockets = false\n\n'
        )
    return text + "[analytics]\nenabled = false\n"


def claude_state(project: Path) -> str:
    """``~/.claude.json`` that skips the TUI's onboarding (it dials api.anthropic.com), the
    API-key question and the folder-trust dialog."""
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [API_KEY], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True, "allowedTools": []}},
    }
    return json.dumps(state)


# -- bounded processes -------------------------------------------------------------------------


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group (ember wrap forwards it and stops its proxy), then
    SIGKILL past ``_STOP_SECONDS``."""
    for sig, wait in ((signal.SIGTERM, _STOP_SECONDS), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_bounded(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float) -> Ran:
    """Run one command (stdin closed) in a process group of its own; past ``timeout`` the
    group is stopped and ``code`` is None."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        out, _ = proc.communicate()
        code = None
    text = out.decode("utf-8", "replace").strip()
    return Ran(tuple(argv), code, time.monotonic() - start, text[-1500:])


def stop_process(proc: subprocess.Popen[bytes], timeout: float = _STOP_SECONDS) -> None:
    """SIGTERM one process we started and wait; SIGKILL past ``timeout``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def stop_wrap_leftover(ember_home: Path, port: int) -> bool:
    """Stop the proxy an ``ember wrap`` of ours started and left behind (a wrap killed at its
    timeout cannot stop it); True when there was one. Only the pid ember recorded for that
    port, and only when it still is an ember proxy on that port."""
    state = ember_home / "run" / f"wrap-{port}.json"
    try:
        pid = int(json.loads(state.read_text()).get("proxy_pid") or 0)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    if pid <= 0 or b"proxy" not in cmdline or str(port).encode() not in cmdline:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_SECONDS
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    return True


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    """Return once ``url``/healthz answers 200; raise past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url + "/healthz", timeout=2) as r,
        ):
            if r.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} not healthy after {timeout:.0f} s")


# -- the interactive TUI -----------------------------------------------------------------------


class _Screen:
    """Reads a pty's output so the child never blocks on a full pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = bytearray()

    def pump(self, seconds: float, until: Callable[[], bool] = lambda: False) -> bool:
        """Read for up to ``seconds`` or until ``until()``; False once the pty is closed."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return False
                if not chunk:
                    return False
                self.text.extend(chunk)
        return True

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())
        self.pump(0.5)
        os.write(self.fd, b"\r")


def _settled(requests: Callable[[], int], before: int, quiet: float) -> Callable[[], bool]:
    """True once more requests than ``before`` arrived and none for ``quiet`` seconds."""
    last = {"n": before, "t": time.monotonic()}

    def done() -> bool:
        n = requests()
        if n != last["n"]:
            last.update(n=n, t=time.monotonic())
        return n > before and time.monotonic() - last["t"] >= quiet

    return done


def drive_tui(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    prompts: Sequence[str],
    requests: Callable[[], int],
    timeout: float,
    pause: float,
) -> Ran:
    """Type each prompt into the TUI, wait until its requests settle (``requests()``: the
    client's requests so far) and ``pause`` more, then ``/exit`` and wait for the exit."""
    start = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(cwd)
        os.execve(argv[0], list(argv), env)
    screen = _Screen(fd)
    screen.pump(30, lambda: b"shortcuts" in screen.text)
    for prompt in prompts:
        screen.type(prompt)
        screen.pump(timeout, _settled(requests, requests(), 3.0))
        screen.pump(pause)
    screen.type("/exit")
    code = _wait_child(pid, screen, timeout)
    os.close(fd)
    tail = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", bytes(screen.text[-3000:]))
    return Ran(tuple(argv), code, time.monotonic() - start, tail.decode("utf-8", "replace"))


def _wait_child(pid: int, screen: _Screen, timeout: float) -> int | None:
    """The child's exit status; past ``timeout`` SIGTERM (then SIGKILL) and None."""
    deadline = time.monotonic() + timeout
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + _STOP_SECONDS
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status) if sig is None else None
            screen.pump(0.2)
    return None


def client_requests(ember_home: Path) -> int:
    """The client's requests ember recorded so far (pacing the TUI only). Read-only from the
    project database: no CLI answers this cheaply enough to poll."""
    total = 0
    for db in ember_home.glob("projects/*/ember.db"):
        with (
            contextlib.suppress(sqlite3.Error),
            contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn,
        ):
            total += int(
                conn.execute("SELECT COUNT(*) FROM exchanges WHERE origin='client'").fetchone()[0]
            )
    return total


# -- the provider emulator ---------------------------------------------------------------------


def dev_upstream_logs(ember: str) -> bool:
    """Whether ``ember dev upstream --help`` lists ``--log``."""
    out = subprocess.run(
        [ember, "dev", "upstream", "--help"], capture_output=True, text=True, timeout=60
    )
    return "--log" in out.stdout


def start_upstream(port: int, log: Path | None, out: Path) -> subprocess.Popen[bytes]:
    """``python -m ember dev upstream`` in a process of its own (``--log`` when ``log``)."""
    argv = [sys.executable, "-m", "ember", "dev", "upstream", "--port", str(port)]
    if log is not None:
        argv += ["--log", str(log)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    with open(out, "wb") as sink:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
