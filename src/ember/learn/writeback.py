"""Writing what ``ember learn`` learned into the file the agent reads at start-up.

Invariants, each tied to the failure it prevents:

- **Only the learn block changes.** Everything outside ``<!-- ember:learn:start -->`` ...
  ``<!-- ember:learn:end -->`` is the user's (``ember.markers``); broken markers stop
  the run instead of being guessed around.
- **Whole sections, and only those re-emitted.** The block is a list of ``### <section>``
  parts. A section the analysis re-emits replaces the old one entirely (the model was asked
  for its complete updated version); a section it does not mention is kept as it was, so a
  run that learned nothing about one topic never erases what earlier runs learned.
- **Personal file by default.** Claude Code shares ``CLAUDE.md`` with the team through git;
  lessons learned from one person's logs carry their absolute paths and tool quirks, so they
  go into ``CLAUDE.local.md``, which is added to ``.git/info/exclude`` (the repository's own
  ``.gitignore`` stays untouched). A learn block left in ``CLAUDE.md`` by an older run is moved
  out of it. Codex (and OpenCode, Grok) read ``AGENTS.md``, Gemini CLI ``GEMINI.md``.
  ``--target`` writes exactly where it says and touches no other file.
- **Dry run first.** ``plan_writeback`` reads and computes, writing nothing; the plan carries
  a unified diff. ``apply_writeback`` writes each file atomically (a crash leaves the old file
  or the new, never half of one) and refuses a file that changed since it was planned, so an
  edit the user saved in between is never overwritten.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ember.errors import EmberError
from ember.fsutil import write_bytes
from ember.markers import Markers
from ember.redaction import mask

LEARN = Markers("learn")
TITLE = "## Learned from past sessions"
NOTE = (
    "_Written by `ember learn --apply`, section by section; edit outside the ember markers "
    "(text in here is replaced the next time its section is learned)._"
)
SECTION_PREFIX = "### "
DEFAULT_SECTION = "General"

CLAUDE_LOCAL = "CLAUDE.local.md"
CLAUDE_SHARED = "CLAUDE.md"
#: The file each agent reads from the project root at start-up.
AGENT_FILES: Mapping[str, str] = {
    "claude": CLAUDE_LOCAL,
    "codex": "AGENTS.md",
    "opencode": "AGENTS.md",
    "grok": "AGENTS.md",
    "gemini": "GEMINI.md",
}


class WritebackError(EmberError):
    """The learned block cannot be written; the message names the file and the fix."""


class RecommendationLike(Protocol):
    """What write-back needs of a recommendation: the section it belongs to and its text."""

    @property
    def section(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Recommendation:
    section: str
    text: str


@dataclass(frozen=True)
class FileChange:
    """One file's content before (None: it does not exist yet) and after."""

    path: Path
    before: bytes | None
    after: bytes
    why: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = (self.before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        new = self.after.decode("utf-8", errors="replace").splitlines(keepends=True)
        a = str(self.path) if self.before is not None else "/dev/null"
        lines = difflib.unified_diff(old, new, fromfile=a, tofile=str(self.path))
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class WritebackPlan:
    """What ``--apply`` would write. ``changes`` holds only files whose bytes differ."""

    target: Path
    changes: tuple[FileChange, ...]
    replaced: tuple[str, ...]  # sections re-emitted over an old version
    added: tuple[str, ...]  # sections new to the block
    kept: tuple[str, ...]  # sections not re-emitted, kept as they were
    migrated_from: Path | None = None

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)


# --- sections (pure) -------------------------------------------------------------------------


def _section_name(name: str) -> str:
    return " ".join(name.split()) or DEFAULT_SECTION


def parse_sections(body: str | None) -> dict[str, str]:
    """The ``### name`` parts of a block body, name -> content (inner blank lines kept, outer
    ones dropped), in file order; text before the first heading is ember's preamble."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (body or "").splitlines():
        if line.startswith(SECTION_PREFIX):
            current = sections.setdefault(_section_name(line[len(SECTION_PREFIX) :]), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}


def render_items(texts: Iterable[str]) -> str:
    """One markdown bullet per recommendation (continuation lines indented under it), with
    any secret masked: a lesson learned from a log that held a key (a command with a token,
    a connection string) must not put it into a file the agent reads every session."""
    out: list[str] = []
    for text in texts:
        lines = [ln.rstrip() for ln in mask(text).strip().splitlines()] or [""]
        first = lines[0] if lines[0].startswith(("- ", "* ")) else "- " + lines[0]
        out.append("\n".join([first, *("  " + ln if ln else "" for ln in lines[1:])]))
    return "\n".join(out)


def merge_sections(
    old: Mapping[str, str], recommendations: Iterable[RecommendationLike]
) -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """Old sections with the re-emitted ones replaced whole (matched without regard to case
    or spacing), new ones appended: (sections, replaced, added, kept)."""
    grouped: dict[str, list[str]] = {}
    for rec in recommendations:
        if rec.text.strip():
            grouped.setdefault(_section_name(rec.section), []).append(rec.text)
    by_key = {name.casefold(): name for name in grouped}
    merged: dict[str, str] = {}
    replaced: list[str] = []
    kept: list[str] = []
    for name, content in old.items():
        new_name = by_key.pop(name.casefold(), None)
        if new_name is None:
            merged[name] = content
            kept.append(name)
        else:
            merged[new_name] = render_items(grouped[new_name])
            replaced.append(new_name)
    added = list(by_key.values())
    for name in added:
        merged[name] = render_items(grouped[name])
    return merged, replaced, added, kept


def render_block(sections: Mapping[str, str], newline: str = "\n") -> str:
    """The whole learn block, markers included."""
    parts = [TITLE, "", NOTE]
    for name, content in sections.items():
        parts += ["", SECTION_PREFIX + name]
        if content:
            parts += ["", content]
    return LEARN.wrap("\n".join(parts), newline)


# --- targets ---------------------------------------------------------------------------------


def default_target(agent: str, project: Path) -> Path:
    try:
        return project / AGENT_FILES[agent]
    except KeyError:
        known = ", ".join(sorted(AGENT_FILES))
        raise WritebackError(
            f"no default file for agent {agent!r} (known: {known}); name one with --target FILE"
        ) from None


def git_exclude_file(start: Path) -> tuple[Path, Path] | None:
    """(``info/exclude`` of the repository holding ``start``, the work tree's root), or None
    outside a repository. Linked work trees share the main repository's exclude file."""
    for root in (start, *start.parents):
        dot = root / ".git"
        if dot.is_dir():
            return dot / "info" / "exclude", root
        if dot.is_file():
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
            common = gitdir / "commondir"
            if common.is_file():
                gitdir = (gitdir / common.read_text(encoding="utf-8").strip()).resolve()
            return gitdir / "info" / "exclude", root
    return None


def excluded(content: str, pattern: str) -> bool:
    """Whether an exclude file's ``content`` already names ``pattern`` (``/sub/FILE``): as
    written, without its leading slash, or as the bare file name (which git matches in every
    directory)."""
    lines = {ln.strip() for ln in content.splitlines()}
    return bool(lines & {pattern, pattern.lstrip("/"), pattern.rsplit("/", 1)[-1]})


# --- plan and apply --------------------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WritebackError(f"cannot read {path}: {exc}") from exc


def _text(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", errors="surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def _exclude_change(target: Path) -> FileChange | None:
    found = git_exclude_file(target.parent.resolve())
    if found is None:
        return None
    exclude, root = found
    try:
        rel = target.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None
    before = _read(exclude)
    content = _text(before)
    pattern = "/" + rel
    if excluded(content, pattern):
        return None
    sep = "" if not content or content.endswith("\n") else "\n"
    after = content + sep + f"# personal lessons written by `ember learn`\n{pattern}\n"
    return FileChange(exclude, before, _bytes(after), f"keep {rel} out of git")


def read_learned(target: Path) -> dict[str, str]:
    """The sections already in ``target``'s learn block (the analysis's "previously learned
    patterns"); empty when there is no file or no block."""
    return parse_sections(LEARN.body(_text(_read(target)), where=str(target)))


def plan_writeback(
    recommendations: Iterable[RecommendationLike],
    *,
    agent: str,
    project: Path,
    target: Path | None = None,
) -> WritebackPlan:
    """Compute what ``--apply`` would write, reading files only.

    ``target`` None means the agent's default file in ``project``; for Claude Code that is
    ``CLAUDE.local.md``, which also gets excluded from git, and a learn block found in
    ``CLAUDE.md`` is moved into it (its sections count as already learned).
    """
    path = target if target is not None else default_target(agent, project)
    before = _read(path)
    existing = _text(before)
    newline = "\r\n" if "\r\n" in existing else "\n"
    old = parse_sections(LEARN.body(existing, where=str(path)))
    changes: list[FileChange] = []
    migrated: Path | None = None
    if target is None and agent == "claude":
        shared = project / CLAUDE_SHARED
        shared_before = _read(shared)
        legacy = LEARN.body(_text(shared_before), where=str(shared))
        if legacy is not None:
            old = {**parse_sections(legacy), **old}
            stripped = _bytes(LEARN.remove(_text(shared_before), where=str(shared)))
            changes.append(FileChange(shared, shared_before, stripped, "move the block out"))
            migrated = shared
    sections, replaced, added, kept = merge_sections(old, recommendations)
    block = render_block(sections, newline)
    after = _bytes(LEARN.merge(existing, block, where=str(path), newline=newline))
    changes.insert(0, FileChange(path, before, after, "write the learned block"))
    if target is None and path.name == CLAUDE_LOCAL:
        exclude = _exclude_change(path)
        if exclude is not None:
            changes.append(exclude)
    return WritebackPlan(
        target=path,
        changes=tuple(c for c in changes if c.changed),
        replaced=tuple(replaced),
        added=tuple(added),
        kept=tuple(kept),
        migrated_from=migrated,
    )


def apply_writeback(plan: WritebackPlan) -> list[Path]:
    """Write the plan's files, each atomically; returns the paths written.

    Every file is checked against the bytes it was planned from before anything is written:
    one edited in between stops the whole apply (nothing written), so the block is never
    half-moved and the user's edit never lost. The target is written before the legacy file
    is stripped, so a crash in between leaves the block in both files, never in neither.
    """
    for change in plan.changes:
        if _read(change.path) != change.before:
            raise WritebackError(
                f"{change.path} changed since the plan was made; run `ember learn` again"
            )
    written: list[Path] = []
    for change in plan.changes:
        try:
            write_bytes(change.path, change.after)
        except OSError as exc:
            raise WritebackError(f"cannot write {change.path}: {exc}") from exc
        written.append(change.path)
    return written
