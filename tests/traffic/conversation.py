"""An agent session through the proxy with the official SDK: the test suite fails, then works.

Each session runs ``python -m pytest -q`` (it fails: no ``python`` here), then
``python3 -m pytest -q | tail -3`` (it works): one recovery lesson and one environment lesson
(``python`` is missing) per session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic

from ember.compose import build_app
from ember.config import Settings
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.store.driver import connect
from ember.testing.agent import TOOLS, system_prompt

CWD = "/home/dev/traffic-project"
NOT_FOUND = "bash: python: command not found"


def db_path(home: Path, cwd: str = CWD) -> Path:
    ref = resolve_project({}, None, f"Working directory: {cwd}")
    assert ref is not None
    return ref.db_path(home)


def send(url: str, session: str, messages: list[dict[str, Any]], cwd: str = CWD) -> None:
    with anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0) as client:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            system=system_prompt(cwd),  # type: ignore[arg-type]
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


def run_session(
    url: str, name: str, cwd: str = CWD, failure: str = NOT_FOUND
) -> list[dict[str, Any]]:
    """One session's three requests (``failure``: what the failed call printed); returns the
    history its last request sent."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Run the test suite please."}]
    send(url, name, history, cwd)
    history.append({"role": "assistant", "content": "Running the tests."})
    tool_round(history, f"{name}-1", "python -m pytest -q", failure, True)
    send(url, name, history, cwd)
    tool_round(history, f"{name}-2", "python3 -m pytest -q | tail -3", "12 passed in 0.4s", False)
    send(url, name, history, cwd)
    return history


def query(
    home: Path, sql: str, args: tuple[Any, ...] = (), cwd: str = CWD
) -> list[tuple[Any, ...]]:
    """Read-only, beside the proxy that owns the file (never a second owner)."""
    path = db_path(home, cwd)
    if not path.exists():
        return []
    conn = connect(path, readonly=True).conn
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def traffic_memories(home: Path, cwd: str = CWD) -> list[tuple[str, str, str]]:
    """(id, category, content) of the memories traffic learning saved."""
    return [
        (r[0], r[1], r[2])
        for r in query(
            home,
            "SELECT id, category, content FROM memories "
            "WHERE json_extract(metadata, '$.source') = 'traffic' ORDER BY seq",
            cwd=cwd,
        )
    ]


def tool_evidence(home: Path, memory_id: str) -> list[tuple[str, str, str]]:
    """(kind, content, session) of the transcript rows a memory's ``tool-verified``
    evidence names."""
    return [
        (r[0], r[1], r[2])
        for r in query(
            home,
            "SELECT t.kind, t.content, t.session_id FROM memory_evidence e "
            "JOIN memories m ON m.seq = e.memory_seq "
            "JOIN transcript_messages t ON t.id = e.message_id "
            "WHERE m.id = ? AND e.kind = 'tool-verified'",
            (memory_id,),
        )
    ]


def serve_sessions(settings: Settings, sessions: tuple[tuple[str, str, str], ...]) -> None:
    """A proxy built from ``settings`` for these sessions (name, working directory, what the
    failed call printed), drained and stopped after them, as ``ember wrap`` does."""
    app = build_app(settings)
    with BackgroundServer(app) as proxy:
        for name, cwd, failure in sessions:
            run_session(proxy.url, name, cwd, failure)
        assert proxy.loop is not None
        asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(30)
