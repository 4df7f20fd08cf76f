"""The ``ember`` command as a user runs it: real processes, real ports on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from ember.server import free_port

EMBER = str(Path(sys.executable).with_name("ember"))


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return {**env, "EMBER_HOME": str(home), **extra}


def _run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EMBER, *args], env=_env(home, **env), capture_output=True, text=True, timeout=120
    )


def test_help_explains_how_to_point_agents_at_the_proxy(tmp_path: Path) -> None:
    out = _run(tmp_path, "--help").stdout
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8787" in out
    for cmd in ("proxy", "demo", "stats", "dev"):
        assert cmd in out
    assert "x-ember-bypass" in _run(tmp_path, "proxy", "--help").stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EMBER_PROT": "9"}, "EMBER_PROT: unknown setting. Did you mean EMBER_PORT?"),
        ({"EMBER_PORT": "x"}, "EMBER_PORT: Input should be a valid integer"),
        ({"EMBER_UNRESOLVED_PROJECT": "everywhere"}, "EMBER_UNRESOLVED_PROJECT:"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_key(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    r = _run(tmp_path, "proxy", "--port", str(free_port()), **env)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_key_in_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "ember.toml"
    cfg.write_text("anthropic_ulr = 'http://x'\n")
    r = _run(tmp_path, "proxy", "--config", str(cfg))
    assert r.returncode == 2
    assert "ember.toml: anthropic_ulr: unknown key. Did you mean anthropic_url?" in r.stderr


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            if httpx2.get(url + "/healthz", timeout=0.5).status_code == 200:
                return
        except httpx2.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} never became healthy")


def test_proxy_and_emulator_processes_serve_a_request(tmp_path: Path) -> None:
    up_port, px_port = free_port(), free_port()
    up, px = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{px_port}"
    env = _env(tmp_path)
    procs = [
        subprocess.Popen(
            [EMBER, "dev", "upstream", "--port", str(up_port)], env=env, stderr=subprocess.PIPE
        ),
        subprocess.Popen(
            [
                EMBER,
                "proxy",
                "--port",
                str(px_port),
                "--anthropic-url",
                up,
                "--openai-url",
                up + "/v1",
            ],
            env=env,
            stderr=subprocess.PIPE,
        ),
    ]
    try:
        _wait_healthy(up, procs[0])
        _wait_healthy(px, procs[1])
        assert httpx2.get(px + "/healthz").json() == {"status": "ok"}
        r = httpx2.post(
            px + "/v1/chat/completions",
            headers={"authorization": "Bearer sk-secret-123", "x-ember-project-id": "cli-test"},
            json={"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert r.status_code == 200
    finally:
        for p in procs:
            p.terminate()
        logs = b"".join(p.communicate(timeout=10)[1] for p in procs)
    assert b"sk-secret-123" not in logs  # keys are forwarded, never logged
    stats = json.loads(_run(tmp_path, "stats", "--project-id", "cli-test", "--json").stdout)
    [session] = stats["sessions"]
    assert session["requests"] == 1 and session["models"] == "gpt-5"
    # A new ask of a project without memories: searched for nothing, turned away by nothing.
    assert stats["memory_asks"] == {"asks": 1, "with_memories": 0, "busy": 0}
    db = Path(stats["db"])
    assert b"sk-secret-123" not in db.read_bytes()


def test_stats_on_an_empty_home(tmp_path: Path) -> None:
    r = _run(tmp_path, "stats")
    assert r.returncode == 0 and "No sessions recorded" in r.stdout


def test_demo_runs_offline_and_reports_cache_reads(tmp_path: Path) -> None:
    r = _run(tmp_path, "demo", "--home", str(tmp_path / "demo"))
    assert r.returncode == 0, r.stderr
    assert "cache reads" in r.stdout and "requests        7" in r.stdout
    assert (tmp_path / "demo" / "projects").is_dir()
