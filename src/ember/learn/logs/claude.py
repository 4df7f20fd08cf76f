"""Claude Code: one JSONL file per session under ``~/.claude/projects/<slug>/``.

Layout: ``<slug>/<session-uuid>.jsonl``, and each sub-agent's run in
``<slug>/<session-uuid>/subagents/agent-<id>.jsonl`` (with an ``agent-<id>.meta.json`` beside
it) — read as a session of its own whose parent is the directory's session. ``<slug>`` is the
working directory with ``/`` and ``.`` replaced by ``-``.

One API message is written over several lines (one content block each) that share
``message.id`` and each carry a copy of the message's ``usage``: usage is counted once per
``message.id``, or a session's tokens come out two to five times too high. A tool result is
matched to its call by ``tool_use_id`` (by order when an old record has none); it failed when
the block says ``is_error``, when the record's ``toolUseResult`` does, or when the user denied it.

Messages are kept for ``learn --verbosity`` (``SessionData.turns``): the lines of one API message
fold into one assistant message (its usage taken once), a user record into one user message
whose parts say what it held; "[Request interrupted by user]" marks an interruption. Meta
records and slash-command wrappers (``<command-name>`` ...) are not the user answering.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ember.learn.logs.base import (
    LogSource,
    Progress,
    as_text,
    compact_input,
    epoch,
    iter_jsonl,
)
from ember.learn.model import (
    Message,
    ScanStats,
    SessionData,
    SessionEvent,
    ToolCall,
    Usage,
    snippet,
)

__all__ = ["ClaudeReader", "project_slug"]

INTERRUPT_MARK = "[Request interrupted by user"
#: Records that carry nothing for learning: counted, deliberately not read.
_METADATA = frozenset(
    {
        "summary",
        "attachment",
        "progress",
        "queue-operation",
        "file-history-snapshot",
        "permission-mode",
        "mode",
        "agent-name",
        "last-prompt",
        "tag",
    }
)
_SYSTEM_EVENTS = {
    "api_error": "api_error",
    "error": "error",
    "compact_boundary": "compaction",
    "api_refusal": "refusal",
    "model_refusal_fallback": "refusal",
}


def project_slug(directory: Path) -> str:
    """The folder name Claude Code gives a working directory under ``~/.claude/projects``."""
    return str(directory).replace("/", "-").replace(".", "-")


class ClaudeReader:
    name = "claude"

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".claude" / "projects"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        if root.is_file():
            yield LogSource(self.name, root, root.stat().st_size)
            return
        for path in sorted(root.rglob("*.jsonl")):
            parent: str | None = None
            meta: Path | None = None
            if path.parent.name == "subagents":
                parent = path.parent.parent.name
                candidate = path.with_suffix(".meta.json")
                meta = candidate if candidate.is_file() else None
            yield LogSource(self.name, path, path.stat().st_size, meta, parent)

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        session = SessionData(
            self.name,
            source.path.stem,
            str(source.path),
            parent_session_id=source.parent_session_id,
        )
        state = _State(session)
        for _lineno, record in iter_jsonl(source.path, stats, progress):
            kind = str(record.get("type"))
            subtype = record.get("subtype")
            key = f"{kind}/{subtype}" if kind == "system" and subtype else kind
            stats.record(key, known=state.take(kind, record))
        yield session


class _State:
    """Folding one session's records, line by line."""

    def __init__(self, session: SessionData) -> None:
        self.session = session
        self.usage_seen: set[str] = set()
        self.pending: dict[str, ToolCall] = {}
        self.unanswered: list[ToolCall] = []
        self.named_id = False
        self.answer: Message | None = None
        self.answer_key: Any = None

    def take(self, kind: str, record: dict[str, Any]) -> bool:
        """Fold ``record`` in; False when its type is not one this reader knows."""
        self._identity(record)
        if kind == "assistant":
            self._assistant(record)
        elif kind == "user":
            self._user(record)
        elif kind == "system":
            self._system(record)
        elif kind == "tool_use":
            self._call(record.get("name"), record.get("input"), record.get("id"), record)
        elif kind == "tool_result":
            self._result(None, record.get("output"), bool(record.get("is_error")), record)
        elif kind in ("ai-title", "custom-title"):
            title = record.get("customTitle") or record.get("aiTitle")
            if isinstance(title, str) and (kind == "custom-title" or not self.session.title):
                self.session.title = title
        else:
            return kind in _METADATA
        return True

    def _identity(self, record: dict[str, Any]) -> None:
        s = self.session
        sid = record.get("sessionId")
        if isinstance(sid, str) and not self.named_id and s.parent_session_id is None:
            s.session_id, self.named_id = sid, True
        if s.project is None and isinstance(record.get("cwd"), str):
            s.project = record["cwd"]
        if s.started is None and isinstance(record.get("timestamp"), str):
            s.started = record["timestamp"]

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            return
        s = self.session
        if isinstance(message.get("model"), str) and message["model"] != "<synthetic>":
            s.model = message["model"]
        key = message.get("id") or record.get("requestId") or record.get("uuid")
        if key is None or key not in self.usage_seen:
            if key is not None:
                self.usage_seen.add(str(key))
            s.messages += 1
            s.usage.add(_usage(message.get("usage")))
        if record.get("isApiErrorMessage"):
            s.events.append(SessionEvent("api_error", snippet(as_text(message.get("content")))))
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self._call(block.get("name"), block.get("input"), block.get("id"), record)
        if message.get("model") != "<synthetic>":
            self._answer(key, record, message)

    def _answer(self, key: Any, record: dict[str, Any], message: dict[str, Any]) -> None:
        """Fold this line into its API message (lines sharing ``message.id`` are one)."""
        if self.answer is None or key is None or key != self.answer_key:
            model = message.get("model")
            self.answer = self.session.add_message(
                Message(
                    "assistant",
                    epoch(record.get("timestamp")),
                    model=model if isinstance(model, str) else None,
                )
            )
            self.answer_key = key
        answer = self.answer
        usage = message.get("usage")
        if isinstance(usage, dict):
            u = _usage(usage)
            fed = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
            answer.output_tokens = max(answer.output_tokens or 0, u.output_tokens)
            answer.input_tokens = max(answer.input_tokens or 0, fed)
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for block in blocks:
            kind = "text" if isinstance(block, str) else None
            if isinstance(block, dict):
                kind = block.get("type") if block.get("type") in ("text", "tool_use") else None
            if kind is None:
                continue
            if kind not in answer.parts:
                answer.parts.append(kind)
            if kind == "text":
                answer.add_text(as_text(block))

    def _user(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        ts = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        outcome = record.get("toolUseResult")
        denied = bool(record.get("toolDenialKind"))
        failed = denied or (isinstance(outcome, dict) and outcome.get("is_error") is True)
        texts: list[str] = []
        said = Message("user", epoch(ts))
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                error = bool(block.get("is_error")) or failed
                self._result(block.get("tool_use_id"), block.get("content"), error, record)
                said.parts.append("tool_error" if error else "tool_result")
            elif block is not None:
                kind = block.get("type") if isinstance(block, dict) else "text"
                said.parts.append(kind if kind in ("image", "document") else "text")
                texts.append(as_text(block))
        text = "\n".join(t for t in texts if t)
        self._said(said, text, record)
        if not text:
            return
        if INTERRUPT_MARK in text:
            self.session.events.append(SessionEvent("interrupt", snippet(text), ts))
        elif not _not_the_user(record) and not text.startswith("<"):
            self.session.events.append(SessionEvent("user_prompt", snippet(text), ts))

    def _said(self, said: Message, text: str, record: dict[str, Any]) -> None:
        """Keep a user message, unless it is not the user answering (meta, a command, the
        summary Claude Code writes after ``/compact``)."""
        if not said.parts or _not_the_user(record):
            return
        if text.startswith("<") and set(said.parts) == {"text"}:
            return
        said.add_text(text)
        said.interrupted = INTERRUPT_MARK in text
        self.session.add_message(said)

    def _system(self, record: dict[str, Any]) -> None:
        kind = _SYSTEM_EVENTS.get(str(record.get("subtype")))
        if kind is None:
            return
        error = record.get("error")
        text = record.get("content") or (as_text(error) if isinstance(error, dict) else error)
        ts = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        self.session.events.append(SessionEvent(kind, snippet(str(text or "")) or None, ts))

    def _call(self, name: Any, args: Any, call_id: Any, record: dict[str, Any]) -> None:
        ts = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        cid = call_id if isinstance(call_id, str) else None
        call = ToolCall(str(name or "?"), compact_input(args), cid, timestamp=ts)
        if cid is not None and cid in self.pending:
            return  # the same block written again (a resumed or split message)
        self.session.add_call(call)
        if cid is not None:
            self.pending[cid] = call
        self.unanswered.append(call)

    def _result(self, call_id: Any, content: Any, error: bool, record: dict[str, Any]) -> None:
        call = self.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None and call_id is None:
            # an old record with no id answers the latest call (a retry or a denial of it)
            pending = self.unanswered or self.session.tool_calls
            call = pending[-1] if pending else None
        if call is None:
            return
        if call in self.unanswered:
            self.unanswered.remove(call)
        text = as_text(content)
        call.output_chars += len(text)
        if error:
            call.is_error = True
            call.error = snippet(text) or "failed"


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()

    def n(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) else 0

    return Usage(
        n("input_tokens"),
        n("output_tokens"),
        n("cache_read_input_tokens"),
        n("cache_creation_input_tokens"),
    )


def _not_the_user(record: dict[str, Any]) -> bool:
    """A user-role record Claude Code wrote itself: meta lines, and the summary that opens the
    history after ``/compact`` (``isCompactSummary``: "This session is being continued...",
    which read as a prompt made the user seem to have typed the whole summary)."""
    return bool(record.get("isMeta") or record.get("isCompactSummary"))
