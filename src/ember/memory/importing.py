"""Parsing ``ember memory import`` lines (pure): one JSON object per line.

``{"content": str, "metadata"?: object, "created_at"?: ISO-8601, "importance"?: float,
"user_id"?: str, "session_id"?: str, "agent_id"?: str}``. A bad line raises
``MemoryInputError`` naming its line number, the field and the fix; the caller skips it and
writes nothing of it. Unknown keys are refused rather than dropped: ``"importnace": 0.9``
silently imported at the default importance is a bug the user would never see. A line that
is nothing but a secret is refused the same way; a secret inside a fact is masked when the
fact is stored (``memory.drafting``), and ``secrets_in`` lets the command say where.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from ember.memory.errors import MemoryInputError
from ember.memory.models import NewMemory
from ember.redaction import redact

KEYS = ("content", "metadata", "created_at", "importance", "user_id", "session_id", "agent_id")


def _fail(lineno: int, problem: str) -> MemoryInputError:
    return MemoryInputError(f"line {lineno}: {problem}")


def parse_time(value: str) -> float:
    """ISO-8601 to epoch seconds; a time without an offset is taken as UTC."""
    dt = datetime.fromisoformat(value.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _text(obj: dict[str, Any], key: str, lineno: int) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise _fail(lineno, f'"{key}" must be a string, got {type(v).__name__}')
    return v


def parse_line(lineno: int, line: str | bytes) -> NewMemory:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise _fail(lineno, f"not valid JSON ({exc}); write one JSON object per line") from exc
    if not isinstance(obj, dict):
        raise _fail(lineno, f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(KEYS))
    if unknown:
        raise _fail(lineno, f"unknown key {unknown[0]!r}; allowed keys: {', '.join(KEYS)}")
    content = _text(obj, "content", lineno)
    if content is None or not content.strip():
        raise _fail(lineno, '"content" is required and must be a non-empty string')
    found = redact(content)
    if found.only_secret:
        raise _fail(lineno, f'"content": {found.reason()}; nothing of the line was stored')
    importance = obj.get("importance", 0.5)
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise _fail(lineno, f'"importance" must be a number between 0 and 1, got {importance!r}')
    if not 0.0 <= float(importance) <= 1.0:
        raise _fail(lineno, f'"importance" must be between 0 and 1, got {importance}')
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise _fail(lineno, f'"metadata" must be a JSON object, got {type(metadata).__name__}')
    created = _text(obj, "created_at", lineno)
    try:
        created_at = parse_time(created) if created is not None else None
    except ValueError as exc:
        raise _fail(
            lineno, f'"created_at" {created!r} is not ISO-8601 (e.g. 2026-03-01T12:00:00Z)'
        ) from exc
    return NewMemory(
        content=content,
        importance=float(importance),
        metadata=metadata,
        created_at=created_at,
        user_id=_text(obj, "user_id", lineno),
        session_id=_text(obj, "session_id", lineno),
        agent_id=_text(obj, "agent_id", lineno),
    )


def parse_lines(
    lines: Iterable[bytes],
) -> Iterator[tuple[int, NewMemory | MemoryInputError]]:
    """Each non-blank line's number and its memory, or the error that rejects it."""
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield lineno, parse_line(lineno, raw)
        except MemoryInputError as exc:
            yield lineno, exc


def secrets_in(item: NewMemory) -> str | None:
    """What will be masked in ``item`` when it is stored (None: nothing), for the user."""
    found = redact(item.content)
    return found.reason() if found.found else None
