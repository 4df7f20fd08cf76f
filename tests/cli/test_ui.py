"""`ember ui` as a user runs it: a process serving the dashboard on loopback only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from ember.server import free_port


def test_ember_ui_serves_the_page_and_stops_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "EMBER_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember", "ui", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/ui/", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, (
                    "ember ui never answered"
                )
                time.sleep(0.1)
        assert r.status_code == 200 and 'name="ember-token"' in r.text
        assert httpx.get(f"http://127.0.0.1:{port}/ui/api/projects").json() == []
    finally:
        proc.send_signal(2)
        _, err = proc.communicate(timeout=30)
    # Ctrl-C stops it as it stops `ember proxy`: 130, the shell's code for SIGINT, no traceback
    assert proc.returncode in (0, 130) and "Traceback" not in err
    assert f"http://127.0.0.1:{port}/ui" in err


def test_ember_ui_refuses_a_non_loopback_host(tmp_path: Path) -> None:
    env = {**os.environ, "EMBER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "ember", "ui", "--host", "0.0.0.0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "not a loopback address" in done.stderr
