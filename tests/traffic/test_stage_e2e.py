"""Traffic learning through the real proxy and the official SDK.

Two sessions of one project each run ``python -m pytest`` (it fails: no ``python`` here),
then ``python3 -m pytest`` (it works). The lesson is seen twice and saved once, as a project
memory whose evidence names the transcript rows of the successful results; the requests
themselves go upstream byte for byte as the client sent them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic

from ember.project import resolve_project
from ember.store.driver import connect
from ember.testing.agent import TOOLS, system_prompt
from tests.conftest import Stack, StackFactory

CWD = "/home/dev/traffic-project"


def db_path(home: Path) -> Path:
    ref = resolve_project({}, None, f"Working directory: {CWD}")
    assert ref is not None
    return ref.db_path(home)


def send(stack: Stack, session: str, messages: list[dict[str, Any]]) -> None:
    with anthropic.Anthropic(base_url=stack.url, api_key="sk-test", max_retries=0) as client:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=system_prompt(CWD),  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            messages=messages,  # type: ignore[arg-type]
            metadata={"user_id": f"user_a_account_b_session_{session}"},
        )


def tool_round(
    history: list[dict[str, Any]], call_id: str, command: str, output: str, error: bool
) -> None:
    history.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
            ],
        }
    )
    history.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": output,
                    "is_error": error,
                }
            ],
        }
    )


def session(stack: Stack, name: str) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Run the test suite please."}]
    send(stack, name, history)
    history.append({"role": "assistant", "content": "Running the tests."})
    tool_round(history, f"{name}-1", "python -m pytest -q", "bash: python: command not found", True)
    send(stack, name, history)
    tool_round(history, f"{name}-2", "python3 -m pytest -q | tail -3", "12 passed in 0.4s", False)
    send(stack, name, history)
    stack.settle()


def query(home: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read-only, beside the proxy that owns the file (never a second owner)."""
    if not db_path(home).exists():
        return []
    conn = connect(db_path(home), readonly=True).conn
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def traffic_memories(home: Path) -> list[tuple[str, str, str]]:
    """(id, category, content) of the memories traffic learning saved."""
    return [
        (r[0], r[1], r[2])
        for r in query(
            home,
            "SELECT id, category, content FROM memories "
            "WHERE json_extract(metadata, '$.source') = 'traffic' ORDER BY seq",
        )
    ]


def test_a_recovery_seen_in_two_sessions_becomes_one_memory_with_checked_evidence(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=0.0)
    session(stack, "aaaaaaaa-0001")
    assert traffic_memories(stack.home) == []  # seen once: not enough
    session(stack, "bbbbbbbb-0002")
    recovery = [m for m in traffic_memories(stack.home) if m[1] == "error_recovery"]
    assert len(recovery) == 1
    assert "`python -m pytest -q` fails" in recovery[0][2]
    assert "`python3 -m pytest -q | tail -3` works" in recovery[0][2]
    evidence = query(
        stack.home,
        "SELECT t.kind, t.content, t.session_id FROM memory_evidence e "
        "JOIN memories m ON m.seq = e.memory_seq JOIN transcript_messages t ON t.id = e.message_id "
        "WHERE m.id = ? AND e.kind = 'tool-verified'",
        (recovery[0][0],),
    )
    # one successful result from each session, each a row of the transcript
    assert [(kind, text) for kind, text, _ in evidence] == [
        ("tool_result", "12 passed in 0.4s")
    ] * 2
    assert len({session for _, _, session in evidence}) == 2


def test_learning_never_changes_what_goes_upstream(make_stack: StackFactory) -> None:
    sent = []
    for learning in (False, True):  # one home: the run that learns comes second
        stack = make_stack(
            stages="features", shadow="primary", shadow_max_share=0.0, traffic_learning=learning
        )
        session(stack, "aaaaaaaa-0001")
        session(stack, "bbbbbbbb-0002")
        sent.append([r.body for r in stack.emulator.requests])
        assert bool(traffic_memories(stack.home)) is learning
    assert sent[0] == sent[1]


def test_nothing_is_learned_without_a_transcript_to_point_at(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features", shadow="off")
    session(stack, "aaaaaaaa-0001")
    session(stack, "bbbbbbbb-0002")
    assert traffic_memories(stack.home) == []
