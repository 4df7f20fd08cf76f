"""What a log reader is, and the streaming helpers every reader shares.

A reader knows one agent's on-disk format: where its logs live by default, how to find the
sessions under a directory, and how to turn one session's files into :class:`SessionData`.
Readers stream: a line is parsed, folded into the session and dropped, so memory follows the
size of the *digest* of a session (its tool calls without their outputs), never of the logs.
A line that is not JSON is reported (file and line) and skipped: one bad line never costs the
rest of the file, and a scan never fails because of one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from ember.learn.model import ScanStats, SessionData

__all__ = [
    "MAX_INPUT_CHARS",
    "LogReader",
    "LogSource",
    "Progress",
    "as_text",
    "compact_input",
    "epoch",
    "iter_jsonl",
    "parse_arguments",
    "read_json_file",
]

#: A string argument longer than this is cut when kept (a Write's content, a patch).
MAX_INPUT_CHARS = 2000
#: A single-JSON log file larger than this is reported instead of being loaded whole.
MAX_JSON_FILE_BYTES = 64 * 1024 * 1024

#: Called with a number of bytes read, so a progress bar can follow a long scan.
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class LogSource:
    """One session's logs as found on disk: ``path`` is its main file (or, for a store holding
    many sessions, the store itself); ``size`` is what a progress bar counts."""

    agent: str
    path: Path
    size: int
    #: a second file that goes with it (Grok's summary.json, a Claude sub-agent's .meta.json)
    companion: Path | None = None
    #: for sub-agent logs: the parent session's id
    parent_session_id: str | None = None


@runtime_checkable
class LogReader(Protocol):
    """One agent's log format. Third-party readers implement this and are registered under the
    ``ember.learn.readers`` entry point group (the entry point loads a class or an instance)."""

    #: the ``--agent`` name (``claude``, ``codex`` ...)
    name: str

    def default_roots(self, home: Path) -> list[Path]:
        """Where the agent writes its logs for a user whose home is ``home``."""
        ...

    def discover(self, root: Path) -> Iterator[LogSource]:
        """Every session under ``root`` (a directory, or a single log file)."""
        ...

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        """The sessions in ``source``; records counted and problems reported into ``stats``."""
        ...


def iter_jsonl(
    path: Path, stats: ScanStats, progress: Progress | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each JSON-object line of ``path``, read line by line.

    Blank lines are skipped silently; a line that is not JSON, or JSON that is not an object,
    is reported in ``stats`` with its file and line and skipped. An unreadable file is reported
    once. Bytes read are added to ``stats.bytes`` (and told to ``progress``).
    """
    stats.files += 1
    pending = 0
    try:
        with path.open("rb") as f:
            for lineno, raw in enumerate(f, 1):
                size = len(raw)
                stats.bytes += size
                pending += size
                if progress is not None and pending >= 1 << 20:
                    progress(pending)
                    pending = 0
                if raw.isspace():
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    stats.problem(str(path), lineno, f"not JSON: {exc}")
                    continue
                if not isinstance(obj, dict):
                    stats.problem(str(path), lineno, f"a JSON {type(obj).__name__}, not an object")
                    continue
                yield lineno, obj
    except OSError as exc:
        stats.problem(str(path), None, f"cannot read: {exc.strerror or exc}")
    if progress is not None and pending:
        progress(pending)


def read_json_file(
    path: Path, stats: ScanStats, progress: Progress | None = None
) -> dict[str, Any] | None:
    """A whole-file JSON object (Gemini's legacy chats, OpenCode's storage, summaries), or None
    after reporting why not. Files past :data:`MAX_JSON_FILE_BYTES` are refused, not loaded."""
    stats.files += 1
    try:
        size = path.stat().st_size
        if size > MAX_JSON_FILE_BYTES:
            stats.problem(str(path), None, f"{size} bytes: too large for a single-JSON log")
            return None
        data = path.read_bytes()
    except OSError as exc:
        stats.problem(str(path), None, f"cannot read: {exc.strerror or exc}")
        return None
    stats.bytes += len(data)
    if progress is not None:
        progress(len(data))
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        stats.problem(str(path), None, f"not JSON: {exc}")
        return None
    if not isinstance(obj, dict):
        stats.problem(str(path), None, f"a JSON {type(obj).__name__}, not an object")
        return None
    return obj


def compact_input(value: Any) -> dict[str, Any]:
    """A tool call's arguments as kept in the model: a dict whose long strings are cut to
    :data:`MAX_INPUT_CHARS` (a 1 MB Write must not stay in memory for the whole scan)."""
    if not isinstance(value, dict):
        value = {"raw": value} if value is not None else {}
    return {str(k): _cut(v) for k, v in value.items()}


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_INPUT_CHARS else value[:MAX_INPUT_CHARS]
    if isinstance(value, dict):
        return {str(k): _cut(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list):
        return [_cut(v) for v in value[:50]]
    return value


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Arguments that came as a JSON string (OpenAI-style ``arguments``) as a dict."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return compact_input({"raw": raw})
    return compact_input(raw)


def as_text(content: Any) -> str:
    """The text of a message or tool-result content in any of the usual shapes: a string, a
    list of blocks with ``text`` (or ``content``) fields, or a dict with ``text`` / ``output``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (as_text(part) for part in content) if t)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "stdout"):
            if key in content:
                return as_text(content[key])
        return ""
    return str(content)


def epoch(value: Any) -> float | None:
    """An ISO 8601 timestamp (``2026-01-02T10:00:00.000Z``) as seconds since the epoch (a
    naive one is taken as UTC); None when absent or not a timestamp."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
