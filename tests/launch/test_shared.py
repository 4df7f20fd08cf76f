"""The registry of wraps sharing one proxy, with a real `ember proxy` child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.clients.address import ProxyAddress
from ember.launch.probe import classify_health, probe
from ember.launch.shared import SharedProxy
from ember.server import free_port


def test_proxy_restarted_after_a_crash_is_not_stopped_under_a_wrap_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("EMBER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    address = ProxyAddress("127.0.0.1", free_port())
    run = tmp_path / "home" / "run"
    run.mkdir(parents=True)
    crashed = subprocess.Popen([sys.executable, "-c", "pass"])
    crashed.wait()
    other_wrap = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    state = {"proxy_pid": crashed.pid, "users": [other_wrap.pid]}
    (run / f"wrap-{address.port}.json").write_text(json.dumps(state))
    shared = SharedProxy(run, "127.0.0.1", address)
    lease = shared.acquire(None, 30)
    try:
        assert lease.started  # the recorded proxy is gone: a new one was started
        assert not shared.release(lease).stopped  # the other wrap still uses it
        assert probe(address.host, address.port).state == "ember"
    finally:
        other_wrap.kill()
        other_wrap.wait()
    assert shared.release(lease).stopped  # a wrap that died no longer holds it up
    assert probe(address.host, address.port).state == "free"


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, b'{"status":"ok"}', "ok"),
        (200, b'{"status": "ok", "storage": []}', "ok"),
        (503, b'{"status":"starting"}', "starting"),
        (404, b"Not Found", "GET /healthz answered 404 b'Not Found'"),
        (200, b"<html>", "GET /healthz answered 200 b'<html>'"),
    ],
)
def test_health_answers_are_told_apart(status: int, body: bytes, verdict: str) -> None:
    assert classify_health(status, body) == verdict
