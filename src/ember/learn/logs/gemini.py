"""Gemini CLI: chat files under ``~/.gemini/tmp/<project hash>/chats/``.

Two formats. The legacy one is a single JSON document (``sessionId``, ``projectHash``,
``messages: [...]``). The newer one is append-only JSONL: a header line with the session's
fields, then one line per message, ``{"$set": {...}}`` lines updating header fields, and
``{"$rewindTo": "<message id>"}`` lines when the user rewound the conversation — that message
and every one after it are no longer part of the session. A message written again with the
same ``id`` replaces the earlier copy (tool results are filled in that way). So a JSONL session
is folded message by message into compact items (calls and events, no outputs) keyed by id,
and a rewind drops items, never re-reads the file.

A tool call failed when its ``status`` is ``error``, its response holds an ``error``, or a
shell's output reports a non-zero ``Exit Code`` (the tool itself "succeeded" then).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.learn.logs.base import (
    LogSource,
    Progress,
    as_text,
    compact_input,
    iter_jsonl,
    read_json_file,
)
from ember.learn.model import ScanStats, SessionData, SessionEvent, ToolCall, Usage, snippet

__all__ = ["GeminiReader"]

_EXIT = re.compile(r"Exit Code: (-?\d+)")
_KNOWN_MESSAGES = frozenset({"user", "gemini", "model", "info", "error", "warning"})
_SKIP_NAMES = frozenset({"logs.json", "settings.json"})


@dataclass
class _Message:
    calls: list[ToolCall] = field(default_factory=list)
    events: list[SessionEvent] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str | None = None


class GeminiReader:
    name = "gemini"

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".gemini" / "tmp"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        paths = [root] if root.is_file() else sorted(root.rglob("*.json*"))
        for path in paths:
            if path.suffix in (".json", ".jsonl") and path.name not in _SKIP_NAMES:
                yield LogSource(self.name, path, path.stat().st_size)

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        session = SessionData(self.name, source.path.stem, str(source.path))
        messages: dict[str, _Message] = {}
        if source.path.suffix == ".json":
            doc = read_json_file(source.path, stats, progress)
            if doc is None:
                return
            _header(session, doc)
            stats.record("session")
            raw = doc.get("messages")
            for i, message in enumerate(raw if isinstance(raw, list) else []):
                if isinstance(message, dict):
                    _take(messages, message, i, stats)
        else:
            for lineno, record in iter_jsonl(source.path, stats, progress):
                _line(session, messages, record, lineno, stats)
        _finish(session, messages)
        yield session


def _line(
    session: SessionData,
    messages: dict[str, _Message],
    record: dict[str, Any],
    lineno: int,
    stats: ScanStats,
) -> None:
    if "$set" in record:
        stats.record("$set")
        if isinstance(record["$set"], dict):
            _header(session, record["$set"])
    elif "$rewindTo" in record:
        stats.record("$rewindTo")
        target = str(record["$rewindTo"])
        if target in messages:
            keys = list(messages)
            for key in keys[keys.index(target) :]:
                del messages[key]
    elif "type" in record:
        _take(messages, record, lineno, stats)
    elif "sessionId" in record:
        stats.record("session")
        _header(session, record)
    else:
        stats.record("?", known=False)


def _header(session: SessionData, doc: dict[str, Any]) -> None:
    if isinstance(doc.get("sessionId"), str):
        session.session_id = doc["sessionId"]
    if isinstance(doc.get("startTime"), str):
        session.started = session.started or doc["startTime"]
    for key in ("projectRoot", "cwd", "directory"):
        if isinstance(doc.get(key), str):
            session.project = doc[key]
    if isinstance(doc.get("projectHash"), str):
        session.project_hash = doc["projectHash"]


def _take(messages: dict[str, _Message], m: dict[str, Any], pos: int, stats: ScanStats) -> None:
    kind = str(m.get("type"))
    known = kind in _KNOWN_MESSAGES
    stats.record(kind, known=known)
    if not known:
        return
    key = str(m.get("id", f"#{pos}"))
    ts = m.get("timestamp") if isinstance(m.get("timestamp"), str) else None
    item = _Message()
    text = as_text(m.get("content", m.get("parts")))
    if kind == "user" and text:
        item.events.append(SessionEvent("user_prompt", snippet(text), ts))
    elif kind == "info" and "cancel" in text.lower():
        item.events.append(SessionEvent("interrupt", snippet(text), ts))
    elif kind == "error":
        item.events.append(SessionEvent("error", snippet(text), ts))
    elif kind == "gemini":
        item.model = m.get("model") if isinstance(m.get("model"), str) else None
        item.usage = _usage(m.get("tokens"))
        calls = m.get("toolCalls")
        for raw in calls if isinstance(calls, list) else []:
            if isinstance(raw, dict):
                item.calls.append(_call(raw, ts))
    messages[key] = item  # a rewrite of the same id keeps its place


def _call(raw: dict[str, Any], ts: str | None) -> ToolCall:
    call = ToolCall(str(raw.get("name", "?")), compact_input(raw.get("args")), raw.get("id"))
    call.timestamp = raw.get("timestamp") if isinstance(raw.get("timestamp"), str) else ts
    output, error = "", None
    results = raw.get("result")
    for part in results if isinstance(results, list) else []:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        response = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(response, dict):
            output += as_text(response.get("output"))
            if response.get("error"):
                error = as_text(response["error"]) or "error"
    call.output_chars = len(output or as_text(raw.get("resultDisplay")))
    code = _EXIT.search(output[:4000])
    if raw.get("status") == "error" or error is not None:
        call.is_error, call.error = True, snippet(error or as_text(raw.get("resultDisplay")))
    elif code and int(code.group(1)) != 0:
        call.is_error, call.error = True, snippet(f"exit code {code.group(1)}: {output}")
    return call


def _usage(tokens: Any) -> Usage:
    if not isinstance(tokens, dict):
        return Usage()

    def n(key: str) -> int:
        value = tokens.get(key)
        return value if isinstance(value, int) else 0

    cached = n("cached")
    return Usage(max(n("input") - cached, 0), n("output") + n("thoughts"), cached)


def _finish(session: SessionData, messages: dict[str, _Message]) -> None:
    for item in messages.values():
        for call in item.calls:
            session.add_call(call)
        session.events.extend(item.events)
        session.usage.add(item.usage)
        session.model = item.model or session.model
        session.messages += 1
