"""`ember wrap` end to end: the real command, a real proxy process, a fake agent on PATH.

The fake agent (tests/cli/fake_agent.py) records the argv and environment it was given and
makes one request the way the real client finds the proxy, against the provider emulator.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.launch.probe import probe
from ember.server import BackgroundServer, free_port
from ember.testing import Emulator
from tests.cli.fake_agent import codex_config
from tests.conftest import StackFactory

EMBER = str(Path(sys.executable).with_name("ember"))
FAKE = Path(__file__).with_name("fake_agent.py")
_SCRUB = ("EMBER_", "ANTHROPIC_", "OPENAI_", "FAKE_AGENT_")
_SCRUB_NAMES = {"CLAUDE_CONFIG_DIR", "CODEX_HOME", "NO_PROXY", "no_proxy"}
_SCRUB_NAMES |= {f"{p}_proxy" for p in ("http", "https", "all")}
_SCRUB_NAMES |= {f"{p}_PROXY" for p in ("HTTP", "HTTPS", "ALL")}


class Agents:
    """A bin directory holding fake `claude` and `codex`, and the environment to run wrap in."""

    def __init__(self, root: Path, upstream: str) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        source = FAKE.read_text()
        for name in ("claude", "codex"):
            exe = self.bin / name
            exe.write_text(f"#!{sys.executable}\n{source}")
            exe.chmod(0o755)
        self.project = root / "project"
        self.project.mkdir()
        self.record = root / "record.json"
        self.port = free_port()
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(_SCRUB) and k not in _SCRUB_NAMES
        }
        if base.get("PYTHONPATH"):  # the agents run elsewhere: keep `PYTHONPATH=src` working
            parts = base["PYTHONPATH"].split(os.pathsep)
            base["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in parts if p)
        self.env = {
            **base,
            "PATH": f"{self.bin}{os.pathsep}{base.get('PATH', '')}",
            "HOME": str(root / "user"),
            "EMBER_HOME": str(root / "ember-home"),
            "EMBER_PORT": str(self.port),
            "EMBER_ANTHROPIC_URL": upstream,
            "EMBER_OPENAI_URL": upstream + "/v1",
            "FAKE_AGENT_RECORD": str(self.record),
        }

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wrap(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EMBER, "wrap", *args],
            env={**self.env, **env},
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
        )

    def start_waiting(self, record: Path, *args: str, **env: str) -> subprocess.Popen[str]:
        """`ember wrap` whose agent waits for a signal; returns once the agent runs. No
        controlling terminal (own session), as under a script or a supervisor."""
        proc = subprocess.Popen(
            [EMBER, "wrap", *args],
            env={**self.env, "FAKE_AGENT_WAIT": "1", "FAKE_AGENT_RECORD": str(record), **env},
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        ready = Path(str(record) + ".ready")
        deadline = time.monotonic() + 60
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"wrap did not start its agent: {proc.communicate()}")
            time.sleep(0.02)
        return proc

    def seen(self, record: Path | None = None) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((record or self.record).read_text())
        return data

    def requests_recorded(self) -> int:
        r = subprocess.run(
            [EMBER, "stats", "--cwd", str(self.project), "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        return sum(s["requests"] for s in json.loads(r.stdout)["sessions"])


@pytest.fixture
def emulator() -> Iterator[BackgroundServer]:
    with BackgroundServer(Emulator()) as srv:
        yield srv


@pytest.fixture
def agents(tmp_path: Path, emulator: BackgroundServer) -> Agents:
    return Agents(tmp_path, emulator.url)


def _reap(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def _port_state(agents: Agents) -> str:
    return probe("127.0.0.1", agents.port).state


def _wait_free(agents: Agents, timeout: float = 30.0) -> None:
    """The proxy a wrap started, finishing in the background, stops by itself."""
    deadline = time.monotonic() + timeout
    while _port_state(agents) != "free":
        assert time.monotonic() < deadline, "the proxy did not stop by itself"
        time.sleep(0.1)


def test_claude_goes_through_a_proxy_wrap_starts_and_the_proxy_does_not_outlive_it(
    agents: Agents,
) -> None:
    r = agents.wrap(
        "claude",
        "--cwd",
        str(agents.project),
        "--",
        "-p",
        "hello",
        FAKE_AGENT_CALL="1",
        FAKE_AGENT_EXIT="3",
    )
    assert r.returncode == 3, r.stderr  # the client's exit status, passed through
    seen = agents.seen()
    assert seen["argv"] == [str(agents.bin / "claude"), "-p", "hello"]
    assert seen["cwd"] == str(agents.project)
    expected_env = {
        **agents.env,
        "FAKE_AGENT_CALL": "1",
        "FAKE_AGENT_EXIT": "3",
        "ANTHROPIC_BASE_URL": agents.origin,
        "ANTHROPIC_CUSTOM_HEADERS": f"x-ember-cwd: {agents.project}",
    }
    assert seen["env"] == expected_env  # exactly these two variables added, nothing else
    assert seen["call"]["status"] == 200, seen["call"]
    assert "started the ember proxy" in r.stderr
    # The session's one turn is read by shadow memory after the client exited: the proxy does
    # that in the background, and stops by itself once it is done.
    assert "finishing 1 session's memory read in the background (up to 120 s)" in r.stderr
    _wait_free(agents)
    assert agents.requests_recorded() == 1  # accounted to the project named by the header


def test_codex_gets_the_ember_provider_by_overrides_and_its_config_file_is_untouched(
    agents: Agents,
) -> None:
    config = Path(agents.env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "gpt-5.1"  # mine\n')
    r = agents.wrap(
        "codex",
        "--cwd",
        str(agents.project),
        "--",
        "exec",
        "hi",
        FAKE_AGENT_CALL="1",
        OPENAI_API_KEY="sk-test",
    )
    assert r.returncode == 0, r.stderr
    seen = agents.seen()
    assert seen["argv"][0] == str(agents.bin / "codex")
    assert seen["argv"][-2:] == ["exec", "hi"]  # the user's arguments after the overrides
    assert codex_config(seen["argv"]) == {
        "model_provider": "ember",
        "model_providers": {
            "ember": {
                "name": "Ember",
                "base_url": agents.origin + "/v1",
                "env_key": "OPENAI_API_KEY",
                "wire_api": "responses",
                "supports_websockets": True,
                "http_headers": {"x-ember-cwd": str(agents.project)},
            }
        },
    }
    assert seen["env"] == {**agents.env, "FAKE_AGENT_CALL": "1", "OPENAI_API_KEY": "sk-test"}
    assert seen["call"]["status"] == 200, seen["call"]
    assert config.read_text() == 'model = "gpt-5.1"  # mine\n'
    _wait_free(agents)  # after reading the session in the background
    assert agents.requests_recorded() == 1


def test_a_proxy_the_user_started_is_used_and_left_running(
    tmp_path: Path, make_stack: StackFactory
) -> None:
    stack = make_stack()
    (tmp_path / "w").mkdir()
    agents = Agents(tmp_path / "w", stack.upstream_url)
    agents.port = stack.proxy.port
    agents.env["EMBER_PORT"] = str(stack.proxy.port)
    r = agents.wrap("claude", "--cwd", str(agents.project), FAKE_AGENT_CALL="1")
    assert r.returncode == 0, r.stderr
    assert agents.seen()["call"]["status"] == 200
    assert "using the ember proxy" in r.stderr and "stopped" not in r.stderr
    assert _port_state(agents) == "ember"
    assert [q.path for q in stack.emulator.requests if q.path != "/healthz"] == ["/v1/messages"]
    assert not (Path(agents.env["EMBER_HOME"]) / "run" / f"proxy-{agents.port}.log").exists()


def test_first_wrap_exiting_does_not_pull_the_proxy_from_under_a_second(agents: Agents) -> None:
    first = agents.start_waiting(agents.root / "first.json", "claude")
    second = agents.start_waiting(agents.root / "second.json", "codex", OPENAI_API_KEY="sk")
    try:
        first.send_signal(signal.SIGTERM)  # forwarded to its agent, which exits 128 + 15
        assert first.wait(30) == 143
        assert agents.seen(agents.root / "first.json")["signals"] == ["SIGTERM"]
        assert _port_state(agents) == "ember"  # the second agent still has its proxy
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 143
        assert "using the ember proxy" in second.communicate(timeout=10)[1]
        assert _port_state(agents) == "free"  # the last one out stopped it
    finally:
        _reap(first, second)


def test_ctrl_c_sent_to_wrap_reaches_the_agent_and_its_status_comes_back(agents: Agents) -> None:
    proc = agents.start_waiting(agents.root / "rec.json", "claude")
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        _reap(proc)
    assert agents.seen(agents.root / "rec.json")["signals"] == ["SIGINT"]
    assert _port_state(agents) == "free"


def test_ctrl_c_typed_at_the_terminal_reaches_the_agent_once(agents: Agents) -> None:
    """In a terminal the driver signals the whole foreground job, agent included; wrap must
    not forward it as well (Claude Code exits on a second Ctrl-C)."""
    master, slave = os.openpty()
    record = agents.root / "tty.json"
    # A session of its own whose controlling terminal is the pty, as a shell would set it up.
    takes_tty = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    takes_tty += "os.execv(sys.argv[1], sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", takes_tty, EMBER, "wrap", "claude"],
        env={**agents.env, "FAKE_AGENT_WAIT": "1", "FAKE_AGENT_RECORD": str(record)},
        cwd=agents.root,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while not Path(str(record) + ".ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.02)
        os.write(master, b"\x03")  # Ctrl-C
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert agents.seen(record)["signals"] == ["SIGINT"]
    assert _port_state(agents) == "free"


def test_port_held_by_a_service_that_is_not_ember_is_refused_before_the_agent_runs(
    agents: Agents,
) -> None:
    # The provider emulator answers /healthz with {"status": "ok"} just like ember would.
    with BackgroundServer(Emulator(), port=agents.port):
        r = agents.wrap("claude")
    assert r.returncode == 2
    assert "not an ember proxy" in r.stderr and "--port" in r.stderr
    assert not agents.record.exists()


def test_missing_agent_says_how_to_install_it_and_starts_no_proxy(agents: Agents) -> None:
    r = agents.wrap("codex", PATH=os.defpath, OPENAI_API_KEY="sk-test")
    assert r.returncode == 2
    assert "npm install -g @openai/codex" in r.stderr
    assert _port_state(agents) == "free"


def test_proxy_that_cannot_start_is_reported_with_the_end_of_its_log(agents: Agents) -> None:
    # Bound but not listening: a connection is refused (the port looks free), the bind fails.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", agents.port))
        r = agents.wrap("claude")
    assert r.returncode == 2
    assert "the ember proxy did not start" in r.stderr
    assert "address already in use" in r.stderr.lower()
    assert not agents.record.exists()


def test_wrap_without_a_client_names_the_clients_and_shows_how() -> None:
    from click.testing import CliRunner

    from ember.cli import cli

    r = CliRunner().invoke(cli, ["wrap"])
    assert r.exit_code == 2
    assert "claude, codex" in r.output and "ember wrap claude" in r.output
