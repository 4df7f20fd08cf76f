"""``ember demo`` tells the whole story, read from the bytes the provider received."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ember.demo import DemoResult, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoResult, str]:
    out = io.StringIO()
    home = tmp_path_factory.mktemp("demo") / "home"
    result = run_demo(home=home, console=Console(file=out, width=200))
    return result, out.getvalue()


def test_accounting_of_the_session(demo: tuple[DemoResult, str]) -> None:
    result, text = demo
    assert result.totals["requests"] == len(result.turns) == 7
    assert sum(t.cache_read_tokens for t in result.turns) > 0
    assert "cache reads" in text and "ember stats --cwd" in text


def test_shaping_block_stays_identical_and_effort_is_lowered_on_tool_turns(
    demo: tuple[DemoResult, str],
) -> None:
    result, text = demo
    shaping = result.shaping
    assert shaping is not None
    assert shaping.blocks_sent == shaping.requests == len(result.turns)
    assert shaping.distinct_blocks == 1 and shaping.client_system_untouched
    assert (shaping.level, shaping.source) == (2, "default")
    assert [(t.kind, t.effort_sent) for t in shaping.turns] == [
        (t.kind, "high" if t.kind == "ask" else "low") for t in result.turns
    ]
    assert "Output shaping" in text and "byte-identical on every turn" in text
    assert "<ember_output_shaping>" in text and "low (lowered)" in text


def test_memory_saved_in_one_session_is_injected_in_the_next_only_in_its_project(
    demo: tuple[DemoResult, str],
) -> None:
    result, text = demo
    memory = result.memory
    assert memory is not None
    assert memory.saved_tool_calls_seen_by_client == 0
    assert memory.injected_block is not None
    assert "must answer 400, never 500" in memory.injected_block
    assert memory.other_project_block is None
    assert "Cross-session memory" in text and "nothing injected (another project" in text
