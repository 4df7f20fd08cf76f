"""``ember demo`` tells the whole story, read from the bytes the provider received."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ember.demo import DemoResult, run_demo
from ember.demo.memory import RULE, run_memory_demo
from ember.demo.shadow import FACT, SESSION_1_TASKS, run_shadow_demo
from ember.embedder import (
    Embedder,
    EmbedderCache,
    EmbedderNotReady,
    EmbedderUnavailable,
    get_embedder,
)
from ember.embedder import factory as factory_module
from ember.shadow.settings import ShadowSettings


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


def test_a_fact_stated_in_session_1_is_extracted_hot_and_injected_in_session_2(
    demo: tuple[DemoResult, str],
) -> None:
    result, text = demo
    shadow = result.shadow
    assert shadow is not None and shadow.run is not None
    run = shadow.run
    # read hot while the proxy stopped, as `ember wrap`'s does when its agent exits
    assert (run["path"], run["status"], run["trigger"]) == ("hot", "completed", "stopping")
    assert run["model"] == "claude-sonnet-4-5"  # the session's own model: a fork, not a cold read
    # The provider got the session's last request back unchanged, then the answer and the
    # question: one request per ask and per tool round, 2 messages each but the last ask.
    requests = sum(1 + len(t.tool_calls) for t in SESSION_1_TASKS)
    assert shadow.session_requests == requests  # the shadow's call is not the user's spend
    fork = shadow.fork
    assert fork is not None and fork.repeated_messages == 2 * requests - 1
    assert fork.added_roles == ["assistant", "user"] and fork.answer_unchanged
    # Most of its input came from the provider's cache.
    assert shadow.cache_read_share is not None and shadow.cache_read_share > 0.5
    assert shadow.cost_share is not None and 0 < shadow.cost_share < 1
    # The proposal points at the user's own message, and became a memory.
    proposal = shadow.proposal
    assert proposal is not None and proposal["validation_error"] is None
    assert FACT in proposal["content"].lower() and shadow.memory_id
    [(kind, target, found_kind, said)] = shadow.evidence
    assert (kind, found_kind) == ("user-stated", "user") and said is not None and FACT in said
    assert [line.split(" ", 1)[0] for line in fork.evidence_lines] == [target]
    # Session 2 got it injected, with its id.
    assert shadow.injected_block is not None
    assert f"[{shadow.memory_id}]" in shadow.injected_block and "eu-west-1" in shadow.injected_block
    assert "path hot" in text and "read from the cache" in text
    assert f"[{shadow.memory_id}]" in text and f"user-stated -> {target}" in text


def test_the_demo_runs_with_shipped_settings_and_shows_the_cost_against_the_budget(
    demo: tuple[DemoResult, str],
) -> None:
    result, text = demo
    default = ShadowSettings.model_fields["shadow_max_share"].default
    assert result.shadow is not None and result.shadow.max_share == default
    share = result.shadow.cost_share
    assert share is not None and f"{share:.1%} of the session's own" in text
    assert f"the project's budget: {default:.0%} of its clients' spend over 7 days" in text
    assert "shipped settings" in text


def test_past_the_budget_the_demo_run_is_skipped_and_says_why(tmp_path: Path) -> None:
    """What the demo prints about a run the budget refuses is what ember recorded."""
    out = io.StringIO()
    console = Console(file=out, width=200)
    shadow = run_shadow_demo(tmp_path / "home", console, shadow_allowance_tokens=0)
    assert shadow.run is not None and shadow.run["status"] == "skipped"
    assert shadow.run["reason"].startswith("budget:") and shadow.run["calls"] == 0
    assert shadow.fork is None and shadow.proposal is None and shadow.injected_block is None
    text = out.getvalue()
    assert "skipped (budget:" in text and "session 2" not in text


def test_learn_shows_the_diff_then_writes_the_block_on_apply(
    demo: tuple[DemoResult, str],
) -> None:
    result, text = demo
    learn = result.learn
    assert learn is not None
    assert learn.loops == ["Bash: cat src/app/setings.py x4"]
    assert learn.model_calls == 2  # one per run: the dry run and the second --apply
    assert not learn.written_before_apply
    assert "+<!-- ember:learn:start -->" in learn.diff and "--- CLAUDE.local.md" in learn.diff
    assert learn.block.startswith("<!-- ember:learn:start -->")
    assert learn.block.endswith("<!-- ember:learn:end -->")
    assert "src/app/settings.py" in learn.block
    assert learn.user_text_kept and learn.second_apply_changes == 0
    assert "Learning from the agent's own logs" in text and "untouched" in text


def test_learn_demo_is_fast_and_the_same_in_any_home(tmp_path: Path) -> None:
    import time

    from ember.demo.learn import run_learn_demo

    outputs = []
    for name in ("a", "bb"):
        out = io.StringIO()
        start = time.monotonic()
        run_learn_demo(tmp_path / name, Console(file=out, width=200))
        assert time.monotonic() - start < 3.0
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    assert str(tmp_path) not in outputs[0]
