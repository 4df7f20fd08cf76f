"""Grok CLI (xAI's own): ``~/.grok/sessions/<pct-encoded cwd>/<session id>/`` holding
``chat_history.jsonl`` (one chat message per line) and ``summary.json`` (id, cwd, model, title,
``session_kind: subagent`` for a sub-agent's run).

Messages: ``system``, ``user`` (``synthetic_reason`` marks ones the CLI wrote itself;
``prior_turn_interrupt`` says the previous turn was cut), ``reasoning``, ``assistant`` with
OpenAI-style ``tool_calls``, ``tool_result`` answering one by ``tool_call_id``, and
``backend_tool_call`` for server-side tools (web search). The summary is optional: without it
the session is named after its directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ember.learn.logs.base import (
    LogSource,
    Progress,
    as_text,
    iter_jsonl,
    parse_arguments,
    read_json_file,
)
from ember.learn.model import ScanStats, SessionData, SessionEvent, ToolCall, snippet

__all__ = ["GrokReader"]

HISTORY = "chat_history.jsonl"
_EXIT = re.compile(r"(?:exit code|exited with code)[:\s]+(-?\d+)", re.IGNORECASE)
_IGNORED = frozenset({"system", "reasoning", "backend_tool_call"})


def _summary_path(history: Path) -> Path | None:
    candidate = history.with_name(history.name.replace(HISTORY, "summary.json"))
    return candidate if candidate != history and candidate.is_file() else None


class GrokReader:
    name = "grok"

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".grok" / "sessions"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        paths = [root] if root.is_file() else sorted(root.rglob(f"*{HISTORY}"))
        for path in paths:
            yield LogSource(self.name, path, path.stat().st_size, _summary_path(path))

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        session = SessionData(self.name, source.path.parent.name, str(source.path))
        if source.companion is not None:
            summary = read_json_file(source.companion, stats, progress)
            if summary is not None:
                stats.record("summary")
                _summary(session, summary)
        calls: dict[str, ToolCall] = {}
        for _lineno, record in iter_jsonl(source.path, stats, progress):
            kind = str(record.get("type"))
            stats.record(kind, known=_take(session, calls, kind, record))
        yield session


def _summary(session: SessionData, doc: dict[str, Any]) -> None:
    raw = doc.get("info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if isinstance(info.get("id"), str):
        session.session_id = info["id"]
    if isinstance(info.get("cwd"), str):
        session.project = info["cwd"]
    for key, attr in (("current_model_id", "model"), ("created_at", "started")):
        if isinstance(doc.get(key), str):
            setattr(session, attr, doc[key])
    title = doc.get("generated_title") or doc.get("session_summary")
    session.title = title if isinstance(title, str) else None
    if doc.get("session_kind") == "subagent":
        parent = doc.get("parent_session_id") or info.get("parent_id")
        session.parent_session_id = parent if isinstance(parent, str) else "unknown"


def _take(session: SessionData, calls: dict[str, ToolCall], kind: str, r: dict[str, Any]) -> bool:
    if kind == "user":
        text = as_text(r.get("content"))
        if r.get("prior_turn_interrupt"):
            session.events.append(SessionEvent("interrupt", str(r["prior_turn_interrupt"])))
        if text and not r.get("synthetic_reason"):
            session.events.append(SessionEvent("user_prompt", snippet(text)))
        return True
    if kind == "assistant":
        session.messages += 1
        if isinstance(r.get("model_id"), str):
            session.model = r["model_id"]
        raw = r.get("tool_calls")
        for item in raw if isinstance(raw, list) else []:
            if isinstance(item, dict):
                call = ToolCall(str(item.get("name", "?")), parse_arguments(item.get("arguments")))
                call.call_id = item.get("id") if isinstance(item.get("id"), str) else None
                session.add_call(call)
                if call.call_id:
                    calls[call.call_id] = call
        return True
    if kind == "tool_result":
        answered = calls.pop(str(r.get("tool_call_id")), None)
        if answered is not None:
            call = answered
            text = as_text(r.get("content"))
            call.output_chars = len(text)
            code = _EXIT.search(text[:2000])
            if r.get("is_error") is True or r.get("error") or (code and code.group(1) != "0"):
                call.is_error, call.error = True, snippet(as_text(r.get("error")) or text)
        return True
    return kind in _IGNORED
