"""``ember learn --verbosity`` on real logs: the Claude Code and Codex readers keep each
session's messages, interrupts and fast replies become a level (never above 3) and a
baseline, dry run by default, ``--apply`` saves them in shaping's ``verbosity.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ember.learn.logs.base import LogSource
from ember.learn.logs.claude import ClaudeReader
from ember.learn.logs.codex import CodexReader
from ember.learn.model import SNIPPET_CHARS, ScanStats
from ember.shaping.from_logs import verbosity_of
from ember.store.driver import connect
from tests.learn.test_learn_cli import ember_home, files_of, home, invoke

__all__ = ["home"]  # the fixture, shared with the end-to-end learn tests

LONG = "This answer goes on. " * 200  # ~4200 chars: a skim takes far longer than a second
T0 = 1_790_000_000


def iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def claude_session(sid: str, exchanges: int, *, tool_interrupts: int = 0) -> list[dict[str, Any]]:
    """Asks answered at length and cut off by the user a second later; then some tool calls
    the user stopped (which say nothing about length)."""
    base = {"sessionId": sid, "cwd": "/work/shop"}
    lines: list[dict[str, Any]] = []
    t = T0
    for i in range(exchanges):
        usage = {"input_tokens": 10, "cache_read_input_tokens": 5000, "output_tokens": 900}
        lines.append({**base, "type": "user", "timestamp": iso(t), "message": {"content": "go"}})
        for half in (LONG[:2000], LONG[2000:]):  # one API message over two lines
            message = {
                "id": f"{sid}-m{i}",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": half}],
                "usage": usage,
            }
            lines.append({**base, "type": "assistant", "timestamp": iso(t + 1), "message": message})
        cut = {"content": [{"type": "text", "text": "[Request interrupted by user]"}]}
        lines.append({**base, "type": "user", "timestamp": iso(t + 2), "message": cut})
        t += 100
    for i in range(tool_interrupts):
        call = {"type": "tool_use", "id": f"{sid}-t{i}", "name": "Bash", "input": {"command": "ls"}}
        lines.append({**base, "type": "user", "timestamp": iso(t), "message": {"content": "ls"}})
        answer = {"id": f"{sid}-c{i}", "content": [call], "model": "claude-sonnet-4-5"}
        lines.append({**base, "type": "assistant", "timestamp": iso(t + 1), "message": answer})
        cut = {"content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}]}
        lines.append({**base, "type": "user", "timestamp": iso(t + 2), "message": cut})
        t += 100
    return lines


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def test_claude_reader_keeps_one_message_per_api_answer(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", claude_session("s", 1, tool_interrupts=1))
    (session,) = ClaudeReader().read(LogSource("claude", path, 0), ScanStats())
    roles = [(m.role, tuple(m.parts), m.interrupted) for m in session.turns]
    assert roles == [
        ("user", ("text",), False),
        ("assistant", ("text",), False),
        ("user", ("text",), True),
        ("user", ("text",), False),
        ("assistant", ("tool_use",), False),
        ("user", ("text",), True),
    ]
    answer = session.turns[1]
    assert answer.chars == len(LONG) and len(answer.text) <= SNIPPET_CHARS  # held: a snippet
    assert (answer.output_tokens, answer.input_tokens) == (900, 5010)  # usage once
    assert answer.timestamp == T0 + 1 and answer.model == "claude-sonnet-4-5"


def test_codex_turn_aborted_is_an_interrupt_of_the_answer(tmp_path: Path) -> None:
    def event(t: float, kind: str, **payload: Any) -> dict[str, Any]:
        return {"timestamp": iso(t), "type": "event_msg", "payload": {"type": kind, **payload}}

    lines: list[dict[str, Any]] = [{"type": "session_meta", "payload": {"id": "cx", "cwd": "/w"}}]
    for i in range(25):
        t = T0 + i * 100
        text = {"type": "output_text", "text": LONG}
        lines += [
            event(t, "user_message", message="explain the build"),
            {
                "timestamp": iso(t + 1),
                "type": "response_item",
                "payload": {"type": "message", "role": "assistant", "content": [text]},
            },
            event(
                t + 1,
                "token_count",
                info={"last_token_usage": {"input_tokens": 7000, "output_tokens": 800}},
            ),
            event(t + 2, "turn_aborted", reason="interrupted"),
        ]
    path = write_jsonl(tmp_path / "rollout.jsonl", lines)
    sessions = list(CodexReader().read(LogSource("codex", path, 0), ScanStats()))
    assert [m.interrupted for m in sessions[0].turns[:3]] == [False, False, True]
    assert sessions[0].turns[1].output_tokens == 800
    run = verbosity_of(sessions, None)
    assert run.report.signals.interrupts == 25 and run.report.level == 3
    assert run.report.baseline_answers == 25 and not run.silent


def stored_verbosity(stats_db: Path) -> Any:
    conn = connect(stats_db, readonly=True).conn
    try:
        row = conn.execute("SELECT doc FROM shaping_state WHERE name = 'verbosity'").fetchone()
    finally:
        conn.close()
    return json.loads(row[0])


def test_fixture_logs_dry_run(home: Path) -> None:
    before = files_of(home)
    result = invoke(home, "--verbosity")  # no model, no key needed
    assert result.exit_code == 0, result.output
    out = result.output
    assert "sessions give no verbosity signals" in out
    assert "gemini x3, grok x2, opencode x3" in out
    assert "Recommended level: none yet" in out
    assert "Dry run: nothing was written" in out and "shaping_state 'verbosity'" in out
    assert files_of(home) == before and not (ember_home(home) / "stats.db").exists()
    report = json.loads(invoke(home, "--verbosity", "--json").output)["verbosity"]
    assert report["new_asks"] > 0 and report["level"] is None
    assert report["baseline_answers"] > 0 and report["baseline"]


def test_interrupts_raise_the_level_to_3_and_apply_saves_it(home: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_jsonl(logs / "a.jsonl", claude_session("a", 15, tool_interrupts=10))
    write_jsonl(logs / "b.jsonl", claude_session("b", 15))
    args = ("--verbosity", "--agent", "claude", "--path", str(logs))
    dry = invoke(home, *args)
    assert dry.exit_code == 0, dry.output
    assert "30 new asks, 30 interrupted (100%)" in dry.output  # tool interrupts not counted
    assert "Recommended level: 3 (learning never recommends above 3)" in dry.output
    assert "30 answers in 1 strata" in dry.output
    assert not (ember_home(home) / "stats.db").exists()

    applied = invoke(home, *args, "--apply", "--json")
    assert applied.exit_code == 0, applied.output
    report = json.loads(applied.output)
    saved = ember_home(home) / "stats.db"
    assert report["written"] == [f"{saved} (shaping_state 'verbosity')"]
    assert report["verbosity"]["level"] == 3 and report["verbosity"]["interrupts"] == 30
    data = stored_verbosity(saved)
    assert data["level"] == 3 and data["learned"]["baseline_answers"] == 30
    ((n, mean, _m2),) = data["baseline"].values()
    assert (n, mean) == (30, 900)
    again = json.loads(invoke(home, *args, "--json").output)
    assert again["verbosity"]["current_level"] == 3
