"""What the real ``ember proxy`` writes is private to the user and holds no API key, at debug
level too: the official SDKs send a distinctive key over HTTP (JSON and streaming) and over a
Responses WebSocket, then every file under ``EMBER_HOME`` (databases and their WAL, the run log
and its rotated files) and the captured stderr are searched for its bytes, and every path's
mode is checked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import openai
import pytest

from ember.server import BackgroundServer, free_port
from ember.testing import Emulator

ANTHROPIC_KEY = "sk-ant-api03-CANARYa1" + "Qx7" * 20
OPENAI_KEY = "sk-proj-CANARYo2" + "Wm5" * 20
#: A key no detector knows by its format: only the header it travels in gives it away.
ODD_KEY = "canary-key-Lp3-only-by-its-header"
KEYS = (ANTHROPIC_KEY, OPENAI_KEY, ODD_KEY)
PROJECT = "/home/dev/acme-api"


@dataclass
class Run:
    home: Path
    stderr: bytes
    #: the files and their bytes while the proxy was serving (the databases' WAL is there)
    live: dict[Path, bytes]
    modes_live: dict[Path, int]


def _modes(home: Path) -> dict[Path, int]:
    return {p: p.stat().st_mode & 0o777 for p in [home, *home.rglob("*")]}


def _files(home: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}


def _wait_ready(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "ember proxy exited"
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    raise AssertionError("ember proxy did not become ready")


def _traffic(url: str) -> None:
    claude = anthropic.Anthropic(
        base_url=url, api_key=ANTHROPIC_KEY, max_retries=0, default_headers={"x-ember-cwd": PROJECT}
    )
    claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=32, messages=[{"role": "user", "content": "hi"}]
    )
    with claude.messages.stream(
        model="claude-sonnet-4-5", max_tokens=32, messages=[{"role": "user", "content": "more"}]
    ) as stream:
        assert stream.get_final_text()
    gpt = openai.OpenAI(
        base_url=url + "/v1",
        api_key=OPENAI_KEY,
        max_retries=0,
        default_headers={"x-ember-cwd": PROJECT},
    )
    gpt.chat.completions.create(model="gpt-5.1", messages=[{"role": "user", "content": "hi"}])
    with gpt.responses.connect() as conn:
        conn.response.create(model="gpt-5.1", input="hello over a socket")
        for event in conn:
            assert event.type not in ("error", "response.failed")
            if event.type == "response.completed":
                break
    odd = anthropic.Anthropic(base_url=url, api_key=ODD_KEY, max_retries=0)
    odd.messages.create(
        model="claude-sonnet-4-5", max_tokens=8, messages=[{"role": "user", "content": "odd"}]
    )


@pytest.fixture(scope="module", params=["log-file", "stderr"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One proxy at debug level, logging as ``ember wrap``'s does (``--log-file``) or to its
    stderr (``ember proxy`` in a terminal), through the traffic above, then stopped."""
    root = tmp_path_factory.mktemp("private")
    home = root / "home"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(home), "EMBER_LOG_LEVEL": "debug"}
    with BackgroundServer(Emulator()) as upstream:
        cmd = [sys.executable, "-m", "ember", "proxy", "--port", str(port)]
        cmd += ["--anthropic-url", upstream.url, "--openai-url", upstream.url + "/v1"]
        if request.param == "log-file":
            cmd += ["--log-file", str(home / "run" / f"proxy-{port}.log")]
        with open(root / "stderr", "wb") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=err, stderr=err)
            try:
                url = f"http://127.0.0.1:{port}"
                _wait_ready(proc, url)
                _traffic(url)
                live, modes = _files(home), _modes(home)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    yield Run(home, (root / "stderr").read_bytes(), live, modes)


def test_no_api_key_is_in_any_file_or_on_stderr_at_debug_level(run: Run) -> None:
    written = {**run.live, **_files(run.home)}
    assert any(p.name.endswith("-wal") for p in run.live)  # the WAL was searched too
    for key in KEYS:
        for path, data in written.items():
            assert key.encode() not in data, f"{key[:16]}... in {path}"
        assert key.encode() not in run.stderr
    logged = run.stderr + b"".join(d for p, d in written.items() if ".log" in p.name)
    # the WebSocket handshake's headers were logged (debug), with the key masked
    assert b"< authorization: Bearer [redacted credential]" in logged


def test_every_folder_is_0700_and_every_file_0600(run: Run) -> None:
    for modes in (run.modes_live, _modes(run.home)):
        assert len(modes) > 5  # the home, projects, databases, WAL, locks
        loose = {str(p): oct(m) for p, m in modes.items() if m not in (0o700, 0o600)}
        assert loose == {}
        assert {m for p, m in modes.items() if p.is_dir()} <= {0o700}
