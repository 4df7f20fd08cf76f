"""The README's memory-injection example (Library mode, "Memories in your own requests") runs
as written, with shipped settings, against the emulator: its first ask gets the project's
memory, and its second request carries that block again, as the same bytes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ember.embedder import get_embedder
from ember.framework import project_ref
from ember.memory import HierarchicalMemory
from ember.server import BackgroundServer
from ember.testing import Emulator

README = Path(__file__).resolve().parents[2] / "README.md"
FACT = "Releases deploy to eu-west-1, triggered by a git tag."


def example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("#### Memories in your own requests") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section has no python example"
    return found.group(1)


def test_the_readme_example_injects_a_memory_and_replays_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with HierarchicalMemory(project_ref("/home/me/code/api").db_path(home), get_embedder()) as m:
        m.add(FACT, importance=0.9)
    script = tmp_path / "example.py"
    script.write_text(example(), encoding="utf-8")
    emu = Emulator()
    with BackgroundServer(emu) as server:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-readme",
            "EMBER_HOME": str(home),
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    first, second = (r.json()["messages"] for r in emu.requests)
    [ask, block] = first[0]["content"]
    assert ask["text"] == "Which region do our releases deploy to?"
    assert block["text"].startswith("<ember-memory>") and FACT in block["text"]
    assert second[0] == first[0]  # the block back at its message
    assert json.dumps(block["text"], ensure_ascii=False).encode() in emu.requests[1].body
    assert len(second) == 3 and len(second[2]["content"]) == 1  # the second ask: nothing new
