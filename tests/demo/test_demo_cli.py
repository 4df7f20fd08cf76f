"""``ember demo`` as a user runs it from a checkout: ``.venv/bin/ember demo``, with ``ember``
not on PATH. The commands it prints run as printed, and it leaves no temporary folder behind
unless asked to keep it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_EMBER = Path(sys.executable).with_name("ember")


def env(tmp: Path) -> dict[str, str]:
    """No ``ember`` on PATH, temporary folders under ``tmp``."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return {**kept, "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)}


def demo(tmp: Path, *args: str) -> str:
    ember = os.path.relpath(VENV_EMBER, ROOT)
    r = subprocess.run(
        [ember, "demo", *args],
        cwd=ROOT,
        env=env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_demo_removes_its_temporary_folder_and_says_how_to_keep_it(tmp_path: Path) -> None:
    out = demo(tmp_path)
    assert list(tmp_path.glob("ember-demo-*")) == []
    ember = os.path.relpath(VENV_EMBER, ROOT)
    assert re.search(rf"The demo's data \({re.escape(str(tmp_path))}/ember-demo-\w+\) was", out)
    assert f"{ember} demo --keep" in out


def test_a_kept_demo_prints_commands_that_run_as_printed(tmp_path: Path) -> None:
    out = demo(tmp_path, "--keep")
    [home] = list(tmp_path.glob("ember-demo-*"))
    assert f"The demo's data is in {home}." in out
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("EMBER_HOME=")]
    ember = os.path.relpath(VENV_EMBER, ROOT)
    assert commands and all(f" {ember} " in c for c in commands)
    for command in commands:
        r = subprocess.run(
            command, shell=True, cwd=ROOT, env=env(tmp_path), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert r.returncode == 0 and "does not exist" not in r.stdout, (command, r.stderr)
    stats = next(c for c in commands if " stats " in c)
    shown = subprocess.run(
        f"{stats} --json", shell=True, cwd=ROOT, env=env(tmp_path), capture_output=True,
        text=True, timeout=120,
    ).stdout  # fmt: skip
    assert '"requests": 7' in shown
