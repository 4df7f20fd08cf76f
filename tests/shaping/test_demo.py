"""``ember demo`` shows shaping: one byte-identical block on every request, effort lowered on
tool-result turns only -- read from the bytes the provider received."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ember.demo import run_demo


def test_demo_shows_the_block_staying_identical_and_effort_lowered_on_tool_turns(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    result = run_demo(home=tmp_path / "home", console=Console(file=out, width=120))
    shaping = result.shaping
    assert shaping is not None
    assert shaping.blocks_sent == shaping.requests == len(result.turns)
    assert shaping.distinct_blocks == 1 and shaping.client_system_untouched
    assert (shaping.level, shaping.source) == (2, "default")
    assert [(t.kind, t.effort_sent) for t in shaping.turns] == [
        (t.kind, "high" if t.kind == "ask" else "low") for t in result.turns
    ]
    text = out.getvalue()
    assert "Output shaping" in text and "byte-identical on every turn" in text
    assert "<ember_output_shaping>" in text and "low (lowered)" in text
