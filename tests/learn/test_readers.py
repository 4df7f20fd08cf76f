"""Reader behaviour the fixtures do not show: split API messages, exit codes, rewinds,
OpenCode's SQLite store, default locations, plugins, and streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.learn.logs import LogSource, Scan, readers, scan, sources
from ember.learn.logs import registry as registry_module
from ember.learn.logs.claude import project_slug
from ember.learn.model import LearnError, ScanStats, SessionData
from ember.store import driver


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read_one(agent: str, path: Path) -> tuple[SessionData, ScanStats]:
    stats = ScanStats()
    reader = readers()[agent]
    (source,) = reader.discover(path)
    (session,) = reader.read(source, stats)
    return session, stats


def test_claude_counts_a_split_api_message_once(tmp_path: Path) -> None:
    """Claude Code writes one API message as several lines sharing message.id, each with a copy
    of the usage: counting every line would triple this session's tokens."""
    usage = {"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 100}

    def line(block: dict[str, Any]) -> dict[str, Any]:
        message = {"id": "msg_1", "model": "claude-x", "content": [block], "usage": usage}
        return {"type": "assistant", "sessionId": "s1", "cwd": "/p", "message": message}

    path = write_jsonl(
        tmp_path / "s1.jsonl",
        [
            {"type": "user", "sessionId": "s1", "message": {"content": "fix the build"}},
            line({"type": "thinking", "thinking": "..."}),
            line({"type": "text", "text": "Reading it."}),
            line({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}),
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "boom",
                            "is_error": True,
                        }
                    ]
                },
            },
        ],
    )
    session, stats = read_one("claude", path)
    assert (session.usage.input_tokens, session.usage.output_tokens) == (10, 7)
    assert session.usage.cache_read_tokens == 100
    assert session.messages == 1
    assert stats.records["assistant"] == 3
    (call,) = session.tool_calls
    assert call.is_error and call.error == "boom"
    assert [e.kind for e in session.events] == ["user_prompt"]


def test_codex_nonzero_exit_code_is_an_error(tmp_path: Path) -> None:
    def item(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "t", "type": kind, "payload": payload}

    path = write_jsonl(
        tmp_path / "rollout-1.jsonl",
        [
            item("session_meta", {"id": "c1", "cwd": "/p"}),
            item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": "a",
                    "arguments": json.dumps({"command": ["bash", "-lc", "pytest"]}),
                },
            ),
            item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "a",
                    "output": json.dumps({"output": "E", "metadata": {"exit_code": 2}}),
                },
            ),
            item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": "b",
                    "arguments": json.dumps({"cmd": "ls missing"}),
                },
            ),
            item(
                "event_msg",
                {
                    "type": "exec_command_end",
                    "call_id": "b",
                    "exit_code": 1,
                    "stderr": "ls: missing: No such file",
                },
            ),
            item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": "c",
                    "arguments": json.dumps({"cmd": "ls"}),
                },
            ),
            item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "c",
                    "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\na\n",
                },
            ),
            item("brand_new_record", {}),
        ],
    )
    session, stats = read_one("codex", path)
    assert [c.is_error for c in session.tool_calls] == [True, True, False]
    assert "No such file" in (session.tool_calls[1].error or "")
    assert stats.unknown == {"brand_new_record": 1}


def test_gemini_jsonl_rewind_drops_the_message_and_what_followed(tmp_path: Path) -> None:
    def gemini(mid: str, command: str) -> dict[str, Any]:
        call = {
            "id": mid,
            "name": "run_shell_command",
            "args": {"command": command},
            "status": "success",
        }
        return {
            "id": mid,
            "type": "gemini",
            "content": "",
            "toolCalls": [call],
            "tokens": {"input": 5, "output": 1},
        }

    path = write_jsonl(
        tmp_path / "session-1.jsonl",
        [
            {"sessionId": "g1", "projectHash": "h", "startTime": "t"},
            {"id": "u1", "type": "user", "content": [{"text": "first"}]},
            gemini("m1", "ls"),
            {"id": "u2", "type": "user", "content": [{"text": "second, later rewound"}]},
            gemini("m2", "rm -rf build"),
            {"$rewindTo": "u2"},
            {"id": "u3", "type": "user", "content": [{"text": "second, again"}]},
            gemini("m3", "make"),
            {"$set": {"lastUpdated": "t2"}},
        ],
    )
    session, stats = read_one("gemini", path)
    assert [c.input["command"] for c in session.tool_calls] == ["ls", "make"]
    assert [e.text for e in session.events] == ["first", "second, again"]
    assert session.usage.input_tokens == 10
    assert stats.records["$rewindTo"] == 1 and stats.records["$set"] == 1


def make_opencode_db(path: Path) -> None:
    conn = driver.connect(path).conn
    conn.executescript(
        """
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT,
            directory TEXT, title TEXT, time_created INTEGER, time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
            time_updated INTEGER, data TEXT);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
            time_created INTEGER, time_updated INTEGER, data TEXT);
        """
    )
    conn.execute("INSERT INTO session VALUES ('ses_1', 'p', NULL, '/work/app', 'Fix', 1, 2)")
    messages = [
        ("msg_1", {"role": "user"}),
        ("msg_2", {"role": "assistant", "modelID": "gpt-x", "tokens": {"input": 9, "output": 3}}),
    ]
    for i, (mid, data) in enumerate(messages):
        conn.execute(
            "INSERT INTO message VALUES (?, 'ses_1', ?, ?, ?)", (mid, i, i, json.dumps(data))
        )
    parts = [
        ("prt_1", "msg_1", {"type": "text", "text": "run the tests"}),
        (
            "prt_2",
            "msg_2",
            {
                "type": "tool",
                "tool": "bash",
                "callID": "c1",
                "state": {
                    "status": "completed",
                    "input": {"command": "npm test"},
                    "output": "FAIL",
                    "metadata": {"exit": 1},
                },
            },
        ),
        (
            "prt_3",
            "msg_2",
            {
                "type": "tool",
                "tool": "read",
                "state": {
                    "status": "error",
                    "input": {"filePath": "/nope"},
                    "error": "File not found",
                },
            },
        ),
        ("prt_4", "msg_2", "{not json"),
    ]
    for pid, mid, data in parts:
        raw = data if isinstance(data, str) else json.dumps(data)
        conn.execute("INSERT INTO part VALUES (?, ?, 'ses_1', 0, 0, ?)", (pid, mid, raw))
    conn.close()


def test_opencode_sqlite_store_is_read_read_only(tmp_path: Path) -> None:
    db = tmp_path / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True)
    make_opencode_db(db)
    before = db.read_bytes()
    session, stats = read_one("opencode", tmp_path / "share")
    assert session.session_id == "ses_1" and session.project == "/work/app"
    assert [(c.name, c.is_error) for c in session.tool_calls] == [("bash", True), ("read", True)]
    assert session.tool_calls[1].error == "File not found"
    assert session.usage.input_tokens == 9
    assert [e.text for e in session.events] == ["run the tests"]
    assert stats.malformed == 1 and "part prt_4" in str(stats.problems[0])
    assert db.read_bytes() == before


def test_default_locations_are_found_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_jsonl(
        home / ".claude/projects" / project_slug(Path("/work/app")) / "a.jsonl",
        [{"type": "user", "cwd": "/work/app", "message": {"content": "hi"}}],
    )
    write_jsonl(
        home / ".claude/projects/-work-other/b.jsonl",
        [{"type": "user", "cwd": "/work/other", "message": {"content": "hi"}}],
    )
    write_jsonl(
        home / ".codex/sessions/2026/01/02/rollout-x.jsonl",
        [{"type": "session_meta", "payload": {"id": "x", "cwd": "/work/app/sub"}}],
    )
    available = readers()
    found = Scan(sources(available, sorted(available), home))
    assert sorted(s.agent for s in found.sources) == ["claude", "claude", "codex"]
    sessions = list(scan(available, found, project=Path("/work/app")))
    assert sorted(s.session_id for s in sessions) == ["a", "x"]
    assert found.other_projects == 1


def test_path_needs_one_agent_and_must_exist(tmp_path: Path) -> None:
    available = readers()
    with pytest.raises(LearnError, match="needs one --agent"):
        sources(available, ["claude", "codex"], tmp_path, [tmp_path])
    with pytest.raises(LearnError, match="no such file"):
        sources(available, ["claude"], tmp_path, [tmp_path / "missing"])
    with pytest.raises(LearnError, match="unknown agent 'cursor'"):
        sources(available, ["cursor"], tmp_path)


class FakeEntryPoint:
    def __init__(self, name: str, loaded: Any) -> None:
        self.name, self.value, self._loaded = name, f"pkg:{name}", loaded

    def load(self) -> Any:
        if isinstance(self._loaded, Exception):
            raise self._loaded
        return self._loaded


class AiderReader:
    name = "aider"

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".aider"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        yield LogSource(self.name, root, 0)

    def read(
        self, source: LogSource, stats: ScanStats, progress: Any = None
    ) -> Iterator[SessionData]:
        stats.record("chat")
        yield SessionData(self.name, "aider-1", str(source.path))


def test_third_party_readers_come_from_the_entry_point_group(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    eps = [
        FakeEntryPoint("aider", AiderReader),
        FakeEntryPoint("broken", ImportError("no module named aider_extra")),
        FakeEntryPoint("odd", object()),
    ]

    def fake(group: str) -> list[FakeEntryPoint]:
        assert group == "ember.learn.readers"
        return eps

    monkeypatch.setattr(registry_module, "entry_points", fake)
    available = readers()
    assert set(available) == {"claude", "codex", "gemini", "grok", "opencode", "aider"}
    assert "broken" in caplog.text and "odd" in caplog.text


def test_a_log_is_streamed_not_loaded(tmp_path: Path) -> None:
    """Memory follows the calls kept, not the bytes read: 20 MB of tool output in one session
    leaves a session of a few kilobytes (inputs cut, outputs only measured)."""
    big = "x" * 1_000_000
    records: list[Any] = []
    for i in range(20):
        records.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"m{i}",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Write",
                            "input": {"file_path": f"/f{i}", "content": big},
                        }
                    ],
                },
            }
        )
        records.append(
            {
                "type": "user",
                "message": {
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": big}]
                },
            }
        )
    session, stats = read_one("claude", write_jsonl(tmp_path / "big.jsonl", records))
    assert stats.bytes > 40_000_000
    assert all(c.output_chars == 1_000_000 for c in session.tool_calls)
    kept = sum(len(str(c.input)) for c in session.tool_calls)
    assert kept < 20 * 2_100
