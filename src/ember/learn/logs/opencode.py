"""OpenCode: ``~/.local/share/opencode/opencode.db`` (SQLite tables ``session``, ``message``,
``part``, each message and part a JSON ``data`` column) and, from older versions, the JSON
file storage ``~/.local/share/opencode/storage/`` (``session/<project>/<id>.json``,
``message/<session>/<id>.json``, ``part/<message>/<id>.json`` — or ``part/<id>.json`` with a
``messageID`` field in the oldest layout).

The database is opened through ``ember.store`` read-only (``query_only``: a bug here cannot
write to the user's OpenCode data) and read with cursors, message by message, so a large store
is never loaded at once. Both layouts fold into the same model: a ``tool`` part is a call whose
``state.status`` is ``error``, or whose ``metadata.exit`` is not 0, when it failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ember.learn.logs.base import LogSource, Progress, as_text, compact_input, read_json_file
from ember.learn.model import ScanStats, SessionData, SessionEvent, ToolCall, Usage, snippet
from ember.store import driver

__all__ = ["OpenCodeReader"]

DB_NAME = "opencode.db"
_PARTS = frozenset(
    {"text", "tool", "reasoning", "file", "step-start", "step-finish", "patch", "compaction"}
)


class OpenCodeReader:
    name = "opencode"

    def __init__(self) -> None:
        self._flat_parts: dict[Path, dict[str, list[Path]]] = {}

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".local" / "share" / "opencode"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        if root.is_file():
            yield LogSource(self.name, root, root.stat().st_size)
            return
        for db in sorted(root.rglob(DB_NAME)):
            yield LogSource(self.name, db, db.stat().st_size)
        for sessions in sorted(p for p in root.rglob("session") if p.is_dir()):
            storage = sessions.parent
            if not (storage / "message").is_dir():
                continue
            for path in sorted(sessions.rglob("*.json")):
                yield LogSource(self.name, path, path.stat().st_size, storage)

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        if source.companion is None:
            yield from self._read_db(source, stats, progress)
        else:
            session = self._read_files(source, source.companion, stats, progress)
            if session is not None:
                yield session

    # -- SQLite ------------------------------------------------------------------------------

    def _read_db(
        self, source: LogSource, stats: ScanStats, progress: Progress | None
    ) -> Iterator[SessionData]:
        stats.files += 1
        try:
            opened = driver.connect(source.path, readonly=True, create=False)
        except driver.errors.Error as exc:
            stats.problem(str(source.path), None, f"cannot open: {exc}")
            return
        conn = opened.conn
        try:
            rows = conn.execute("SELECT * FROM session ORDER BY time_created, id").fetchall()
            for row in rows:
                stats.record("session")
                yield self._db_session(conn, source, dict(row), stats)
        except driver.errors.Error as exc:
            stats.problem(str(source.path), None, f"not an OpenCode database: {exc}")
        finally:
            conn.close()
        stats.bytes += source.size
        if progress is not None:
            progress(source.size)

    def _db_session(
        self, conn: driver.Connection, source: LogSource, row: dict[str, Any], stats: ScanStats
    ) -> SessionData:
        session = _new_session(source, row)
        fold = _Fold(session)
        messages = conn.execute(
            "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
            (row["id"],),
        )
        for message_id, data in messages:
            message = _loads(data, f"{source.path}: message {message_id}", stats)
            if message is None:
                continue
            stats.record(f"message/{message.get('role')}")
            parts = conn.execute(
                "SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (message_id,)
            )
            decoded = (_loads(d, f"{source.path}: part {pid}", stats) for pid, d in parts)
            fold.message(message, (p for p in decoded if p is not None), stats)
        return session

    # -- JSON storage ----------------------------------------------------------------------

    def _read_files(
        self, source: LogSource, storage: Path, stats: ScanStats, progress: Progress | None
    ) -> SessionData | None:
        doc = read_json_file(source.path, stats, progress)
        if doc is None:
            return None
        stats.record("session")
        session = _new_session(source, doc)
        fold = _Fold(session)
        folder = storage / "message" / str(doc.get("id"))
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            message = read_json_file(path, stats, progress)
            if message is None:
                continue
            stats.record(f"message/{message.get('role')}")
            parts = self._part_files(storage, str(message.get("id")))
            loaded = (read_json_file(p, stats, progress) for p in parts)
            fold.message(message, (p for p in loaded if p is not None), stats)
        return session

    def _part_files(self, storage: Path, message_id: str) -> list[Path]:
        folder = storage / "part" / message_id
        if folder.is_dir():
            return sorted(folder.glob("*.json"))
        if storage not in self._flat_parts:
            index: dict[str, list[Path]] = {}
            for path in sorted((storage / "part").glob("*.json")):
                try:
                    owner = orjson.loads(path.read_bytes()).get("messageID")
                except (OSError, orjson.JSONDecodeError, AttributeError):
                    continue
                index.setdefault(str(owner), []).append(path)
            self._flat_parts[storage] = index
        return self._flat_parts[storage].get(message_id, [])


def _new_session(source: LogSource, doc: dict[str, Any]) -> SessionData:
    session = SessionData("opencode", str(doc.get("id")), str(source.path))
    session.project = _str(doc.get("directory"))
    session.title = _str(doc.get("title"))
    session.parent_session_id = _str(doc.get("parentID", doc.get("parent_id")))
    time = doc.get("time")
    created = time.get("created") if isinstance(time, dict) else doc.get("time_created")
    session.started = str(created) if created is not None else None
    return session


class _Fold:
    """One session's messages and their parts, in order, into the model."""

    def __init__(self, session: SessionData) -> None:
        self.session = session

    def message(self, m: dict[str, Any], parts: Iterator[dict[str, Any]], stats: ScanStats) -> None:
        s = self.session
        s.messages += 1
        model = m.get("model")
        s.model = (
            _str(m.get("modelID"))
            or (_str(model.get("modelID")) if isinstance(model, dict) else None)
            or s.model
        )
        s.usage.add(_usage(m.get("tokens")))
        error = m.get("error")
        if isinstance(error, dict):
            aborted = error.get("name") == "MessageAbortedError"
            s.events.append(SessionEvent("interrupt" if aborted else "api_error", _err(error)))
        texts: list[str] = []
        for part in parts:
            kind = str(part.get("type"))
            stats.record(f"part/{kind}", known=kind in _PARTS)
            if kind == "tool":
                s.add_call(_tool(part))
            elif kind == "text" and not part.get("synthetic"):
                texts.append(as_text(part.get("text")))
            elif kind == "compaction":
                s.events.append(SessionEvent("compaction"))
        if m.get("role") == "user" and any(texts):
            s.events.append(SessionEvent("user_prompt", snippet("\n".join(texts))))


def _tool(part: dict[str, Any]) -> ToolCall:
    raw = part.get("state")
    state: dict[str, Any] = raw if isinstance(raw, dict) else {}
    call = ToolCall(str(part.get("tool", "?")), compact_input(state.get("input")))
    call.call_id = _str(part.get("callID"))
    output = as_text(state.get("output"))
    call.output_chars = len(output)
    meta = state.get("metadata")
    code = meta.get("exit") if isinstance(meta, dict) else None
    if state.get("status") == "error":
        call.is_error, call.error = True, snippet(as_text(state.get("error")) or output)
    elif isinstance(code, int) and code != 0:
        call.is_error, call.error = True, snippet(f"exit code {code}: {output}")
    return call


def _usage(tokens: Any) -> Usage:
    if not isinstance(tokens, dict):
        return Usage()
    raw = tokens.get("cache")
    cache: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return Usage(
        _int(tokens.get("input")),
        _int(tokens.get("output")) + _int(tokens.get("reasoning")),
        _int(cache.get("read")),
        _int(cache.get("write")),
    )


def _err(error: dict[str, Any]) -> str | None:
    data = error.get("data")
    return snippet(as_text(data.get("message")) if isinstance(data, dict) else str(error))


def _loads(data: Any, where: str, stats: ScanStats) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError) as exc:
        stats.problem(where, None, f"data is not JSON: {exc}")
        return None
    if not isinstance(obj, dict):
        stats.problem(where, None, "data is not a JSON object")
        return None
    return obj


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
