"""The README's library-mode example runs as written, with shipped settings, against the
emulator, and its fact is extracted by a hot shadow turn through memory_propose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ember.config import load_settings
from ember.embedder import get_embedder
from ember.server import BackgroundServer
from ember.shadow.library import database_path
from ember.testing import Emulator
from ember.testing.shadow import shadow_replies
from tests.shadow.test_e2e import rows

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Library mode") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the Library mode section has no python example"
    return found.group(1)


def test_the_readme_example_runs_and_its_fact_is_extracted(tmp_path: Path) -> None:
    get_embedder()  # built once in this run's models cache, which the example shares
    emu = Emulator()
    emu.reply_fn = shadow_replies()
    script = tmp_path / "example.py"
    script.write_text(example(), encoding="utf-8")
    with BackgroundServer(emu) as server:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-readme",
            "EMBER_HOME": str(tmp_path / "home"),
            "EMBER_ANTHROPIC_URL": server.url,
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    assert "status='completed'" in done.stdout, done.stdout
    settings = load_settings(env={}, home=tmp_path / "home")
    db = database_path(settings, "/home/me/code/api")
    [(path, status)] = rows(db, "SELECT path, status FROM shadow_memory_runs")
    assert (path, status) == ("hot", "completed")
    [(content, error, memory_id)] = rows(
        db, "SELECT content, validation_error, memory_id FROM shadow_fact_proposals"
    )
    assert "eu-west-1" in content and error is None and memory_id
