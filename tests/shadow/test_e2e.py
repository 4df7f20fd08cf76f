"""Shadow memory end to end, through the real proxy and the official SDK.

Session 1 states a fact and the turn ends; the shadow forks the session's last request (hot:
the provider reads the old prefix from its cache), the emulated model proposes the fact with
evidence, ember checks it and makes it a memory; session 2 asks about it and gets it injected.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.store.driver import connect
from ember.testing.agent import TOOLS, system_prompt
from ember.testing.replies import Reply
from ember.testing.shadow import shadow_replies
from tests.conftest import Stack, StackFactory

CWD = "/home/dev/shadow-project"
FACT = "Remember: releases deploy to eu-west-1 through the deploy workflow on tags."


def db_path(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def ask(stack: Stack, session: str, history: list[dict[str, Any]], text: str) -> str:
    history.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        }
    )
    with anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0) as client:
        msg = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=system_prompt(CWD),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            messages=history,  # type: ignore[arg-type]
            metadata={"user_id": f"user_a_account_b_session_{session}"},
        )
    answer = "".join(getattr(b, "text", "") for b in msg.content)
    history[-1]["content"][-1].pop("cache_control")
    history.append({"role": "assistant", "content": answer})
    return answer


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = connect(db, readonly=True).conn
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.fixture
def shadowed(make_stack: StackFactory) -> Stack:
    get_embedder()  # loaded once: session 2's ask must not wait for the model
    # A share of 1: these sessions are two turns long, and a shadow run costs about one turn.
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.reply_fn = shadow_replies()
    return stack


def test_a_fact_stated_in_one_session_is_extracted_hot_and_injected_in_the_next(
    shadowed: Stack,
) -> None:
    stack = shadowed
    db = db_path(stack.home)
    history: list[dict[str, Any]] = []
    # Long enough to pass the emulator's minimum cacheable prefix.
    ask(
        stack,
        "0a0a0a0a-0000-4000-8000-000000000001",
        history,
        "Let me tell you about this repo. " * 40,
    )
    ask(stack, "0a0a0a0a-0000-4000-8000-000000000001", history, FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs WHERE status='completed'"))
    [(path, cache_read, input_tokens, status)] = rows(
        db,
        "SELECT path, cache_read_tokens, input_tokens, status FROM shadow_memory_runs "
        "WHERE status='completed'",
    )
    assert path == "hot" and status == "completed"
    assert cache_read > 0 and cache_read / (cache_read + input_tokens) > 0.5
    # Promotion follows the run's write (embedding the fact takes a moment).
    wait_for(
        lambda: rows(db, "SELECT memory_id FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")
    )
    [(content, error, memory_id)] = rows(
        db, "SELECT content, validation_error, memory_id FROM shadow_fact_proposals"
    )
    assert "eu-west-1" in content and error is None and memory_id
    # The shadow's calls are accounted apart from the user's session.
    origins = {r[0] for r in rows(db, "SELECT origin FROM exchanges")}
    assert origins == {"client", "shadow"}
    [(requests,)] = rows(db, "SELECT requests FROM session_totals")
    assert requests == 2
    # Session 2: the fact comes back where it belongs.
    with HierarchicalMemory(db, get_embedder()) as mem:
        [memory] = [m for m in mem.list() if m.id == memory_id]
        assert [e.kind for e in mem.evidence(memory.id)] == ["user-stated"]
    ask(stack, "0b0b0b0b-0000-4000-8000-000000000002", [], "Where does this project deploy to?")
    assert f"[{memory_id}]".encode() in stack.emulator.requests[-1].body


def test_a_new_user_message_aborts_a_running_shadow_call_and_nothing_is_proposed(
    shadowed: Stack,
) -> None:
    """The shadow's call hangs (the provider never answers); the user speaks: the call is
    aborted at once, the run recorded cancelled, not one proposal written."""
    stack = shadowed
    answer = shadow_replies()

    def hanging(body: dict[str, Any], path: str) -> Reply | None:
        reply = answer(body, path)
        return None if reply is None else Reply(reply.text, delay_headers=60)

    stack.emulator.reply_fn = hanging
    db = db_path(stack.home)
    session = "0c0c0c0c-0000-4000-8000-000000000003"
    history: list[dict[str, Any]] = []
    ask(stack, session, history, FACT)
    wait_for(lambda: any(b"[ember shadow turn]" in r.body for r in stack.emulator.requests))
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs") == [("running",)])
    spoke = time.time()
    ask(stack, session, history, "Actually, one more thing.")
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs") == [("cancelled",)], 5)
    [(finished, error)] = rows(db, "SELECT finished_at, error FROM shadow_memory_runs")
    assert error == "interrupted-by-user" and finished - spoke < 1.0
    assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]


def test_a_run_past_the_budget_waits_and_a_later_run_reads_its_messages(
    make_stack: StackFactory,
) -> None:
    """No allowance, 15% of the project's client spend: the first short turn cannot pay for a
    run, which is skipped saying why, and calls nothing. Its messages stay unread: once the
    session has spent more, the next run reads them too, and the first turn's fact is kept."""
    stack = make_stack(stages="features", shadow="primary", shadow_allowance_tokens=0)
    stack.emulator.reply_fn = shadow_replies()
    db = db_path(stack.home)
    session, history = "0d0d0d0d-0000-4000-8000-000000000004", []
    ask(stack, session, history, FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs"))
    [(status, reason, calls)] = rows(db, "SELECT status, reason, calls FROM shadow_memory_runs")
    assert status == "skipped" and reason.startswith("budget:") and calls == 0
    assert "stay unread" in reason
    assert not any(b"[ember shadow turn]" in r.body for r in stack.emulator.requests)
    ask(stack, session, history, "Here is the whole design document. " + "word " * 40_000)
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
    [(from_seq,)] = rows(db, "SELECT from_seq FROM shadow_memory_runs WHERE status='completed'")
    [(first,)] = rows(db, "SELECT MIN(seq) FROM transcript_messages")
    assert from_seq == first  # the skipped run's messages were read by the later one
    wait_for(lambda: rows(db, "SELECT 1 FROM shadow_fact_proposals WHERE memory_id IS NOT NULL"))
    kept = rows(db, "SELECT content FROM shadow_fact_proposals WHERE memory_id IS NOT NULL")
    assert any("eu-west-1" in c for (c,) in kept)
