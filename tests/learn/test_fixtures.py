"""Every real log fixture (``../shared/fixtures/agent-logs``, see its SOURCES.md) parses, with
the number of records of each type it holds, and what it says about tool calls and failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.learn.logs import LogSource, readers
from ember.learn.model import ScanStats, SessionData
from tests.learn.conftest import AGENT_LOGS, needs_agent_logs

pytestmark = needs_agent_logs

AGENT_DIRS = {
    "claude": "claude-code",
    "codex": "codex",
    "gemini": "gemini-cli",
    "grok": "grok",
    "opencode": "opencode",
}

# path -> (records per type, unknown records, malformed lines, [(tool calls, failed), ...])
EXPECTED: dict[str, tuple[dict[str, int], int, int, list[tuple[int, int]]]] = {
    "claude-code/agent-sessions__claude_schema_drift.jsonl": (
        {
            "user": 2,
            "tool_use": 1,
            "tool_result": 1,
            "assistant": 1,
            "system/turn_duration": 1,
            "permission-mode": 1,
            "mode": 1,
            "attachment": 1,
            "system/stop_hook_summary": 1,
        },
        0,
        0,
        [(1, 0)],
    ),
    "claude-code/agent-sessions__claude_small.jsonl": (
        {
            "system/session_start": 1,
            "permission-mode": 1,
            "mode": 1,
            "attachment": 38,
            "system/stop_hook_summary": 1,
            "summary": 1,
            "user": 10,
            "assistant": 10,
            "progress": 1,
            "queue-operation": 1,
            "file-history-snapshot": 1,
            "agent-name": 1,
            "custom-title": 1,
            "ai-title": 1,
            "last-prompt": 1,
            "system/api_refusal": 1,
            "system/compact_boundary": 2,
            "frame-link": 1,
            "pr-link": 1,
            "started": 1,
            "result": 1,
            "relocated": 1,
            "worktree-state": 2,
            "system/error": 1,
            "system/api_error": 4,
            "system/turn_duration": 1,
            "system/model_refusal_fallback": 1,
            "bridge-session": 1,
            "atis-latch": 1,
        },
        9,
        0,
        [(3, 1)],
    ),
    "claude-code/agent-sessions__subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl": (
        {"system/session_start": 1, "user": 1, "assistant": 1},
        0,
        0,
        [(1, 0)],
    ),
    "claude-code/agent-sessions__subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f/subagents/"
    "agent-a0ad4f44468bdf20d.jsonl": (
        {"user": 2, "assistant": 1, "attachment": 1},
        0,
        0,
        [(1, 0)],
    ),
    "claude-code/claude-code-log__edge_cases.jsonl": (
        {"user": 10, "assistant": 4, "None": 1, "summary": 1},
        1,
        3,
        [(3, 1)],
    ),
    "claude-code/claude-code-log__representative_messages.jsonl": (
        {"user": 6, "assistant": 5, "summary": 1},
        0,
        0,
        [(2, 0)],
    ),
    "claude-code/claude-code-log__session_b.jsonl": (
        {"user": 2, "assistant": 1},
        0,
        0,
        [(0, 0)],
    ),
    "claude-code/claude-code-log__todowrite_examples.jsonl": (
        {"user": 5, "assistant": 6, "summary": 1},
        0,
        0,
        [(3, 0)],
    ),
    "claude-code/claude-code-transcripts__sample_session.jsonl": (
        {"summary": 1, "user": 4, "assistant": 3},
        0,
        0,
        [(2, 0)],
    ),
    "codex/agent-sessions__codex_050_legacy.jsonl": (
        {"session_meta": 1, "event_msg/turn.completed": 2, "event_msg/token_count": 2},
        0,
        0,
        [(0, 0)],
    ),
    "codex/agent-sessions__codex_051_usage.jsonl": (
        {"session_meta": 1, "event_msg/turn.completed": 2},
        0,
        0,
        [(0, 0)],
    ),
    "codex/agent-sessions__codex_052_raw.jsonl": (
        {"session_meta": 1, "event_msg/codex/event/raw_item": 3, "event_msg/turn.completed": 2},
        3,
        0,
        [(0, 0)],
    ),
    "codex/agent-sessions__codex_053_rate_limit.jsonl": (
        {
            "session_meta": 1,
            "event_msg/token_count": 2,
            "event_msg/error": 1,
            "event_msg/account/rateLimits/updated": 1,
        },
        1,
        0,
        [(0, 0)],
    ),
    "codex/agent-sessions__codex_large.jsonl": (
        {
            "session_meta": 1,
            "event_msg/user_message": 1,
            "turn_context": 1,
            "response_item/message": 14,
            "response_item/tool_call": 1,
            "response_item/tool_result": 1,
            "event_msg/token_count": 1,
        },
        0,
        0,
        [(1, 0)],
    ),
    "codex/agent-sessions__codex_small.jsonl": (
        {
            "session_meta": 7,
            "turn_context": 9,
            "world_state": 5,
            "event_msg/user_message": 3,
            "event_msg/task_started": 2,
            "response_item/message": 3,
            "response_item/reasoning": 2,
            "event_msg/agent_reasoning": 1,
            "response_item/custom_tool_call": 2,
            "response_item/function_call": 2,
            "response_item/function_call_output": 2,
            "response_item/tool_search_call": 2,
            "response_item/tool_search_output": 1,
            "response_item/web_search_call": 1,
            "event_msg/web_search_end": 1,
            "event_msg/mcp_tool_call_end": 6,
            "event_msg/patch_apply_end": 1,
            "event_msg/thread_settings_applied": 1,
            "event_msg/context_compacted": 1,
            "event_msg/turn_aborted": 1,
            "response_item/custom_tool_call_output": 3,
            "event_msg/token_count": 3,
            "event_msg/agent_message": 1,
            "event_msg/task_complete": 2,
            "compacted": 6,
            "event_msg/sub_agent_activity": 1,
            "inter_agent_communication_metadata": 1,
            "response_item/agent_message": 2,
            "event_msg/image_generation_end": 2,
            "event_msg/thread_goal_updated": 2,
            "event_msg/entered_review_mode": 6,
            "event_msg/exited_review_mode": 3,
            "response_item/image_generation_call": 1,
            "event_msg/item_completed": 13,
            "event_msg/thread_name_updated": 1,
            "event_msg/exec_command_end": 3,
            "event_msg/collab_agent_spawn_end": 1,
            "event_msg/collab_waiting_end": 1,
            "event_msg/collab_close_end": 1,
            "event_msg/guardian_assessment": 4,
            "event_msg/view_image_tool_call": 1,
            "event_msg/dynamic_tool_call_request": 1,
            "event_msg/dynamic_tool_call_response": 1,
            "event_msg/error": 1,
            "event_msg/collab_agent_interaction_end": 2,
            "response_item/ghost_snapshot": 1,
            "event_msg/undo_completed": 1,
        },
        33,
        0,
        [(4, 0)],
    ),
    "codex/claude-code-transcripts__sample_codex_session.jsonl": (
        {
            "session_meta": 1,
            "response_item/message": 3,
            "event_msg/user_message": 1,
            "turn_context": 6,
        },
        0,
        0,
        [(0, 0)],
    ),
    "gemini-cli/agent-sessions__gemini_jsonl_v040.jsonl": (
        {"session": 1, "user": 1, "$set": 1, "gemini": 2},
        0,
        0,
        [(1, 0)],
    ),
    "gemini-cli/agent-sessions__gemini_large.json": (
        {"session": 1, "user": 2, "gemini": 2, "info": 1, "model": 2},
        0,
        0,
        [(2, 1)],
    ),
    "gemini-cli/agent-sessions__gemini_small.json": (
        {"session": 1, "user": 1, "gemini": 1},
        0,
        0,
        [(0, 0)],
    ),
    "grok/agent-sessions__grok_chat_history.jsonl": (
        {
            "summary": 1,
            "system": 1,
            "user": 3,
            "reasoning": 2,
            "assistant": 2,
            "tool_result": 2,
            "backend_tool_call": 1,
        },
        0,
        0,
        [(2, 0)],
    ),
    "grok/agent-sessions__grok_subagent/chat_history.jsonl": (
        {"summary": 1, "system": 1, "user": 1, "assistant": 2, "tool_result": 1},
        0,
        0,
        [(1, 0)],
    ),
    "opencode/agent-sessions__opencode/storage_legacy/session/proj_test/ses_s_stage0_drift.json": (
        {"session": 1, "message/user": 1, "message/assistant": 1, "part/tool": 1, "part/text": 1},
        0,
        0,
        [(1, 0)],
    ),
    "opencode/agent-sessions__opencode/storage_v2/session/proj_test/ses_s_stage0_large.json": (
        {
            "session": 1,
            "message/user": 2,
            "message/assistant": 2,
            "part/text": 4,
            "part/tool": 1,
            "part/file": 1,
            "part/reasoning": 1,
            "part/step-start": 1,
            "part/step-finish": 1,
            "part/compaction": 1,
            "part/patch": 1,
        },
        0,
        0,
        [(1, 1)],
    ),
    "opencode/agent-sessions__opencode/storage_v2/session/proj_test/ses_s_stage0_small.json": (
        {"session": 1, "message/user": 1, "message/assistant": 1, "part/text": 2, "part/tool": 1},
        0,
        0,
        [(1, 0)],
    ),
}


def discovered() -> dict[str, tuple[str, LogSource]]:
    found: dict[str, tuple[str, LogSource]] = {}
    available = readers()
    for agent, folder in AGENT_DIRS.items():
        for source in available[agent].discover(AGENT_LOGS / folder):
            found[source.path.relative_to(AGENT_LOGS).as_posix()] = (agent, source)
    return found


def read(agent: str, source: LogSource) -> tuple[ScanStats, list[SessionData]]:
    stats = ScanStats()
    return stats, list(readers()[agent].read(source, stats))


def test_every_fixture_is_found_and_expected() -> None:
    """Discovery finds every session-log fixture, and each one has expectations below: a new
    fixture without counts fails here instead of going untested."""
    data_files = {
        p.relative_to(AGENT_LOGS).as_posix()
        for p in AGENT_LOGS.rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl")
    }
    # files that belong to a session found under another name: summaries, parts, messages
    companions = {
        f
        for f in data_files
        if f.endswith(("summary.json", ".meta.json"))
        or "/message/" in f
        or "/part/" in f
        or f.endswith("sample_session.json")
    }
    assert set(discovered()) == set(EXPECTED)
    assert set(EXPECTED) | companions == data_files


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_with_counts_per_record_type(name: str) -> None:
    agent, source = discovered()[name]
    records, unknown, malformed, calls = EXPECTED[name]
    stats, sessions = read(agent, source)
    assert dict(stats.records) == records
    assert sum(stats.unknown.values()) == unknown
    assert stats.malformed == malformed
    assert [(len(s.tool_calls), sum(c.is_error for c in s.tool_calls)) for s in sessions] == calls
    assert all(s.agent == agent and s.session_id for s in sessions)


def test_malformed_lines_are_reported_with_file_and_line() -> None:
    agent, source = discovered()["claude-code/claude-code-log__edge_cases.jsonl"]
    stats, sessions = read(agent, source)
    assert [(Path(p.path).name, p.line) for p in stats.problems] == [
        ("claude-code-log__edge_cases.jsonl", 13),
        ("claude-code-log__edge_cases.jsonl", 15),
        ("claude-code-log__edge_cases.jsonl", 16),
    ]
    # the lines after the bad ones were still read
    assert sessions[0].tool_calls[-1].name == "TodoWrite"


def test_claude_subagent_is_its_own_session_pointing_at_its_parent() -> None:
    _, parent = discovered()[
        "claude-code/agent-sessions__subagent/0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"
    ]
    sub = next(s for n, (_, s) in discovered().items() if "/subagents/" in n)
    (session,) = read("claude", sub)[1]
    assert session.parent_session_id == "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f"
    assert session.session_id == "agent-a0ad4f44468bdf20d"
    assert read("claude", parent)[1][0].parent_session_id is None


def test_failures_carry_their_error_text() -> None:
    _, gemini = discovered()["gemini-cli/agent-sessions__gemini_large.json"]
    (session,) = read("gemini", gemini)[1]
    failed = [c for c in session.tool_calls if c.is_error]
    assert [c.input["command"] for c in failed] == ["ls /non-existent-directory"]
    assert "exit code 1" in (failed[0].error or "")
    _, opencode = discovered()[
        "opencode/agent-sessions__opencode/storage_v2/session/proj_test/ses_s_stage0_large.json"
    ]
    (session,) = read("opencode", opencode)[1]
    assert session.tool_calls[0].is_error
    assert [e.kind for e in session.events] == [
        "user_prompt",
        "interrupt",
        "compaction",
        "user_prompt",
    ]


def test_grok_summary_names_the_session_and_marks_subagents() -> None:
    _, main = discovered()["grok/agent-sessions__grok_chat_history.jsonl"]
    _, sub = discovered()["grok/agent-sessions__grok_subagent/chat_history.jsonl"]
    (session,) = read("grok", main)[1]
    assert session.session_id == "019f6851-7ec4-7ef0-97d3-03f3eee38755"
    assert session.project == "/tmp/as-agent-lab/grok/project"
    assert not session.is_subagent
    assert read("grok", sub)[1][0].is_subagent
