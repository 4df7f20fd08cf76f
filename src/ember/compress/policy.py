"""Which tool outputs ember may shorten, and how far (pure).

An agent edits what it reads: a file's text that reached it shortened would be edited from a
version that is not on disk, and a diff it reviews must be the diff. So an output stays exact
— byte for byte what the tool returned — when

- its tool reads or writes files (``Read``, ``Edit``, ``Write``, ``read_file``, ...), or the
  settings say so for its tool (``compress_tools``),
- it came from a command that prints a file or a change (``cat``, ``sed -n``, ``head``,
  ``git diff``, ``git show``, ...),
- it looks like a file's source or a diff whatever printed it,
- it is small (under ``compress_min_chars``), an error the tool flagged (short, and all of it
  is what the agent acts on), or not text (an image, a document, NULs or broken encoding).

Otherwise it may be shortened: lossy (lines or records left out, each left-out run marked
with the ``ref`` that brings it back) where the original can be retrieved, lossless only
(regrouped search hits and file lists) where it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: What the settings may say of a tool: shorten as ember sees fit, only regroup (nothing
#: left out), or leave it exact.
ToolPolicy = Literal["auto", "lossless", "off"]

#: Tools whose output is a file's content or the result of editing one (any client).
EXACT_TOOLS = frozenset(
    {
        "Read", "Edit", "MultiEdit", "Write", "NotebookRead", "NotebookEdit", "TodoWrite",
        "read_file", "read", "write_file", "write", "edit", "edit_file", "replace",
        "str_replace_based_edit_tool", "str_replace_editor", "apply_patch", "view_image",
        "read_many_files", "write_todos", "todo_write", "todowrite",
    }
)  # fmt: skip
#: Commands that print a file, part of one, or a change.
_EXACT_COMMANDS = re.compile(
    r"(?:^|[;&|]\s*|\bxargs\s+)(?:cat|bat|nl|head|tail|less|more|sed\s+-n|awk|jq|xxd|od"
    r"|git\s+(?:diff|show|log\s+-p|format-patch|blame)|diff|cmp|patch|type|Get-Content)\b",
)
_DIFF = re.compile(r"^(?:diff --git |--- a/|\+\+\+ b/|@@ -\d)", re.MULTILINE)
_CODE = re.compile(
    r"^\s*(?:\d+\s*[→|:\t]\s*)?(?:def |class |import |from \S+ import |function |const |let |"
    r"var |public |private |func |fn |package |#include|return\b|if \(|for \(|\}|\{$)"
)
#: A share of code-looking lines above which an output is taken for a file's text.
CODE_SHARE = 0.25


@dataclass(frozen=True)
class Verdict:
    """``how``: ``lossy``, ``lossless`` or None (leave it exact), and why."""

    how: Literal["lossy", "lossless"] | None
    why: str


def judge(
    tool: str | None,
    arguments: Mapping[str, Any],
    text: str | None,
    *,
    is_error: bool,
    min_chars: int,
    policies: Mapping[str, ToolPolicy],
    retrievable: bool,
) -> Verdict:
    """What may be done with one tool output (``retrievable``: the session can ask for an
    original back, so a lossy shortening is allowed)."""
    if text is None:
        return Verdict(None, "not text")
    if len(text) < min_chars:
        return Verdict(None, "small")
    if "\x00" in text or text.count("\ufffd") > 8:
        return Verdict(None, "binary")
    policy = policies.get(tool or "", "off" if tool in EXACT_TOOLS else "auto")
    if policy == "off":
        return Verdict(None, f"exact: {tool} reads or writes files")
    if is_error:
        return Verdict(None, "a tool error")
    command = _command(arguments)
    if command and _EXACT_COMMANDS.search(command):
        return Verdict(None, "exact: the command prints a file or a change")
    if _looks_exact(text):
        return Verdict(None, "exact: a file's text or a diff")
    if policy == "lossless" or not retrievable:
        return Verdict("lossless", "regrouping only")
    return Verdict("lossy", "shortened")


def _command(arguments: Mapping[str, Any]) -> str:
    """The shell command a call ran (Claude Code's ``command``, Codex's ``command`` list or
    ``cmd``), or ""."""
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return ""


def _looks_exact(text: str) -> bool:
    head = text[:20_000]
    if len(_DIFF.findall(head)) >= 2:
        return True
    lines = [line for line in head.split("\n")[:400] if line.strip()]
    if len(lines) < 5:
        return False
    code = sum(1 for line in lines if _CODE.match(line))
    return code / len(lines) >= CODE_SHARE


_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/#-]{2,}")
_COMMON = frozenset(
    re.findall(
        r"\w+",
        """the and for with that this what from have you are not was but all can will your
        into out run use get set let make then them they there here how why when where which
        who please could would should about just like also only some more most other than been
        being does did done doing check show look find tell see need want test tests file""",
    )
)


def terms_of(*texts: str, limit: int = 40) -> list[str]:
    """The words of the user's ask and the call's arguments worth finding in an output: ids,
    names, numbers, paths (common words left out), first seen first."""
    out: dict[str, None] = {}
    for text in texts:
        for m in _WORD.finditer(text):
            word = m.group(0).strip(".:/#-")
            if len(word) >= 3 and word.lower() not in _COMMON:
                out[word] = None
                if len(out) >= limit:
                    return list(out)
    return list(out)
