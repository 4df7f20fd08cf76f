"""A correction replaces what it corrects: only the new fact is injected afterwards.

The shadow question shows, with their ids, the memories injected into the session and the
facts its earlier reads stored; the emulated model names the one a correction replaces
(``supersedes``), as a careful model would. Hot across sessions and within one, cold after a
compaction, and the steward's read — each leaves one current fact, the old kept as history.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import ProjectRef
from ember.proxy.upstream import Upstream
from ember.shadow import cursors
from ember.shadow.models import FactIn
from ember.shadow.question import Remembered
from ember.store.registry import Storage
from ember.testing import Emulator
from ember.testing.shadow import shadow_replies
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import ask, db_path, rows, wait_for
from tests.shadow.test_steward import (  # the steward's fixtures, and its session
    KEY,
    MODEL,
    PROJECT,
    S,
    answer,
    emulator,
    fact,
    project_db,
    steward,
    storage,
    transcript,
    upstream,
)

__all__ = ["emulator", "storage", "upstream"]

OLD = "We deploy to Fly.io with flyctl from the main branch."
FIX = "Correction: we no longer deploy to Fly.io, deploys go to Render from the main branch."
PADDING = "Let me tell you about this repo. " * 40


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    get_embedder()
    made = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    made.emulator.reply_fn = shadow_replies()
    return made


def current(stack: Stack) -> list[tuple[str, str]]:
    with HierarchicalMemory(db_path(stack.home), get_embedder()) as mem:
        return sorted((m.id, m.content) for m in mem.list())


def stored(stack: Stack, n: int) -> None:
    """Wait until ``n`` proposals became memories."""
    sql = "SELECT COUNT(*) FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"
    wait_for(lambda: rows(db_path(stack.home), sql) == [(n,)])


def injected(stack: Stack) -> set[str]:
    return set(re.findall(rb"- \[([0-9a-f]{12})\]", stack.emulator.requests[-1].body))  # type: ignore[arg-type]


def shadow_questions(stack: Stack) -> list[bytes]:
    return [r.body for r in stack.emulator.requests if b"[ember shadow turn]" in r.body]


def test_a_correction_in_a_later_session_replaces_the_injected_fact(stack: Stack) -> None:
    ask(stack, "5a5a0000-0000-4000-8000-000000000001", [], OLD + " " + PADDING)
    stored(stack, 1)
    [(old_id, _)] = current(stack)

    session, history = "5a5a0000-0000-4000-8000-000000000002", []
    ask(stack, session, history, "Where do we deploy this project to? " + PADDING)
    assert {old_id.encode()} == injected(stack)
    ask(stack, session, history, FIX)
    stored(stack, 2)
    # The read showed the injected fact by its id, and the model named it.
    assert f"- [{old_id}] {OLD}".encode() in shadow_questions(stack)[-1]
    [(new_id, content)] = current(stack)
    assert "Render" in content and new_id != old_id

    ask(stack, "5a5a0000-0000-4000-8000-000000000003", [], "Where do we deploy to? " + PADDING)
    assert injected(stack) == {new_id.encode()}
    assert b"Fly.io with flyctl" not in stack.emulator.requests[-1].body
    with HierarchicalMemory(db_path(stack.home), get_embedder()) as mem:
        assert [m.id for m in mem.history(new_id)] == [old_id, new_id]  # kept as history


def test_a_correction_within_a_session_replaces_what_an_earlier_read_stored(
    stack: Stack,
) -> None:
    session, history = "5b5b0000-0000-4000-8000-000000000001", []
    ask(stack, session, history, OLD + " " + PADDING)
    stored(stack, 1)
    [(old_id, _)] = current(stack)
    ask(stack, session, history, FIX)
    stored(stack, 2)
    [(_, content)] = current(stack)
    assert "Render" in content
    assert f"- [{old_id}] {OLD}".encode() in shadow_questions(stack)[-1]


def test_a_correction_read_cold_after_a_compaction_replaces_the_fact(stack: Stack) -> None:
    session, history = "5c5c0000-0000-4000-8000-000000000001", []
    ask(stack, session, history, OLD + " " + PADDING)
    stored(stack, 1)
    ask(stack, session, history, FIX)
    # A compaction at once: the old generation's unread turn is read cold by the light model.
    ask(stack, session, [], "This session continues a previous conversation. Summary: deploys.")
    db = db_path(stack.home)
    wait_for(
        lambda: rows(
            db,
            "SELECT 1 FROM shadow_memory_runs WHERE trigger='generation-ended' "
            "AND status='completed' AND path='cold'",
        )
    )
    stored(stack, 2)
    [(_, content)] = current(stack)
    assert "Render" in content


async def test_the_steward_is_shown_what_is_remembered_and_may_end_only_that(
    emulator: tuple[Emulator, str], upstream: Upstream, storage: Storage
) -> None:
    emu, base = emulator
    db = project_db(storage)
    db.write(cursors.activate)
    ids = transcript(db)
    shown: list[Remembered] = [("0123456789ab", "Deploys run from main with the deploy script")]
    got: list[FactIn] = []

    async def known(project: ProjectRef, session_id: str) -> list[Remembered]:
        return shown

    async def promote(
        project: ProjectRef, session_id: str, facts: Sequence[tuple[str, FactIn]]
    ) -> dict[str, str]:
        got.extend(f for _, f in facts)
        return {}

    corrected = fact("Deploys run from a separate worktree", ("user-stated", ids[0]))
    # the one it was shown, and one of another session it was never shown
    emu.script(answer({**corrected, "supersedes": ["0123456789ab", "fedcba987654"]}))
    await steward(storage, upstream, base, promote=promote, known=known).run(
        S, 1, PROJECT, "anthropic", KEY, model=MODEL
    )
    [kept] = got
    assert kept.supersedes == ["0123456789ab"]
    question: Any = emu.requests[-1].body
    assert b"- [0123456789ab] Deploys run from main with the deploy script" in question
    assert b'\\"supersedes\\"' in question  # the rules say how to name it
