"""``ember demo`` tells the whole story, read from the bytes the provider received."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ember.demo import DemoResult, run_demo
from ember.demo.memory import RULE, run_memory_demo
from ember.memory.embed import (
    Embedder,
    EmbedderCache,
    EmbedderNotReady,
    EmbedderUnavailable,
    get_embedder,
)
from ember.memory.embed import factory as factory_module


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


class LoadsOnlyForAPatientCaller:
    """An embedder load that outlasts the longest wait a request may be configured to take
    (``memory_embedder_wait`` <= 60 s) but finishes for a caller who waits as a demo may:
    a busy machine, without sleeping through it in the test."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.loaded = False
        self.waits: list[float | None] = []

    def preload(self, *args: object) -> LoadsOnlyForAPatientCaller:
        return self

    def get(self, timeout: float | None = None) -> Embedder:
        self.waits.append(timeout)
        if not self.loaded and timeout is not None and timeout <= 60:
            raise EmbedderNotReady("still loading")
        self.loaded = True
        return self.model


def test_the_demo_waits_for_a_slow_embedder_instead_of_printing_nothing_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = LoadsOnlyForAPatientCaller(get_embedder())  # the real model, loaded once per run
    monkeypatch.setattr(factory_module, "DEFAULT", slow)
    out = io.StringIO()
    memory = run_memory_demo(tmp_path / "home", Console(file=out, width=200))
    assert memory.injected_block is not None and RULE in memory.injected_block
    assert memory.embedder_error is None
    assert "nothing was injected" not in out.getvalue()
    assert any(w is None or w > 60 for w in slow.waits)


def test_without_weights_the_demo_says_why_nothing_was_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_weights(*args: object) -> Embedder:
        raise EmbedderUnavailable("no weights for all-MiniLM-L6-v2; pip install ...")

    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(no_weights))
    out = io.StringIO()
    memory = run_memory_demo(tmp_path / "home", Console(file=out, width=200))
    assert memory.injected_block is None and memory.other_project_block is None
    assert "the embedder is unavailable: no weights for all-MiniLM-L6-v2" in out.getvalue()
