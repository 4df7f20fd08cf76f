"""Writers: one frozen row per agent file format, one export pipeline for all of them.

rank (importance x recency x access) -> dedup by content hash -> cut to the format's token
budget -> render a markdown list -> wrap in markers -> merge into the existing file.

Budgets: Claude Code keeps about the first 200 lines of ``MEMORY.md`` in context (~2k tokens);
``AGENTS.md`` is merged up the directory tree by Codex, Cursor rules and a generic file get
3k. The Cursor rule needs YAML frontmatter, written only when ember creates the file (in a
file the user already has, only the marker span is ember's).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ember.memory.models import Memory
from ember.memory.writers import markers
from ember.memory.writers.rank import select
from ember.redaction import mask
from ember.tokens import count_tokens


@dataclass(frozen=True)
class Writer:
    format: str
    filename: str  # relative to the destination directory
    budget_tokens: int
    frontmatter: str = ""


WRITERS: dict[str, Writer] = {
    w.format: w
    for w in (
        Writer("claude", "MEMORY.md", 2000),
        Writer("codex", "AGENTS.md", 3000),
        Writer(
            "cursor",
            ".cursor/rules/ember-memory.mdc",
            3000,
            "---\ndescription: Facts remembered about this project by ember\n"
            "globs:\nalwaysApply: true\n---\n\n",
        ),
        Writer("generic", "EMBER_MEMORY.md", 3000),
    )
}

TITLE = "## Project memory"
NOTE = (
    "Facts remembered from earlier sessions, most useful first. This block is rewritten by "
    "`ember memory export`; edit outside the ember markers."
)


@dataclass(frozen=True)
class ExportResult:
    path: Path
    memories: int
    tokens: int
    changed: bool


def writer_for(fmt: str) -> Writer:
    try:
        return WRITERS[fmt]
    except KeyError:
        known = ", ".join(WRITERS)
        raise ValueError(f"unknown export format {fmt!r}; use one of {known}") from None


def claude_project_dir(project_root: str, claude_home: Path) -> Path:
    """Claude Code's per-project directory: the absolute path with every character that is
    not a letter, digit or ``-`` replaced by ``-`` (``/a/b.c`` -> ``-a-b-c``)."""
    return claude_home / "projects" / re.sub(r"[^A-Za-z0-9-]", "-", project_root)


def default_dest(fmt: str, project_root: str | None, user_home: Path) -> Path | None:
    """Where a format's file goes when ``--dest`` is not given (None: it must be given)."""
    if project_root is None:
        return None
    if fmt == "claude":
        return claude_project_dir(project_root, user_home / ".claude") / "memory"
    return Path(project_root)


def _line(m: Memory) -> str:
    """One memory as its bullet, any secret masked: an exported file is read by every
    session of the agent (and often committed), so a key a store may still hold from an
    older ember never reaches it."""
    day = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
    return f"- {' '.join(mask(m.content).split())} ({day})"


def render(writer: Writer, memories: Sequence[Memory], now: float) -> tuple[str, int, int]:
    """The marker block for ``memories``: (text, memories kept, tokens of the body)."""
    overhead = count_tokens(TITLE + "\n\n" + NOTE + "\n\n")
    kept = select(memories, now, max(0, writer.budget_tokens - overhead), _line)
    lines = [TITLE, "", NOTE]
    if kept:
        lines += ["", *(_line(m) for m in kept)]
    body = "\n".join(lines)
    return body, len(kept), count_tokens(body)


def export(memories: Sequence[Memory], writer: Writer, dest_dir: Path, now: float) -> ExportResult:
    """Write ``memories`` into ``dest_dir/writer.filename``; only the marker span changes."""
    path = dest_dir / writer.filename
    body, kept, tokens = render(writer, memories, now)
    raw = path.read_bytes() if path.exists() else None
    existing = raw.decode("utf-8", errors="surrogateescape") if raw is not None else ""
    newline = "\r\n" if "\r\n" in existing else "\n"
    block = markers.wrap(body, newline)
    if raw is None and writer.frontmatter:
        merged = writer.frontmatter + block + "\n"
    else:
        merged = markers.merge(existing, block, where=str(path), newline=newline)
    data = merged.encode("utf-8", errors="surrogateescape")
    if raw == data:
        return ExportResult(path, kept, tokens, changed=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".ember-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return ExportResult(path, kept, tokens, changed=True)
