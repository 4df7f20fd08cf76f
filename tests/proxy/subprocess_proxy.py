"""Run ``ember proxy`` as a real process (signals, kill -9, two proxies on one home)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ember.server import free_port


@contextmanager
def proxy_process(
    home: Path, upstream: str, *, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Start ``ember proxy`` on a free loopback port; yields (process, base URL). Stopped with
    SIGTERM at the end if still running."""
    port = port or free_port()
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EMBER_")},
        "EMBER_HOME": str(home),
        "EMBER_LOG_LEVEL": "warning",
        **(env or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "ember",
        "proxy",
        "--port",
        str(port),
        "--anthropic-url",
        upstream,
        "--openai-url",
        upstream + "/v1",
    ]
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"ember proxy exited with {proc.returncode}: {err[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"ember proxy did not become ready on {url}")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout)
