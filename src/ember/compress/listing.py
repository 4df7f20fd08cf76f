"""Search hits and file lists regrouped without losing anything (pure).

``grep -rn`` and ripgrep repeat each file's path on every hit, and a file listing repeats
every directory on every file: most of the bytes are the same prefixes again. Regrouped, each
path or directory is written once, and every hit and every file is still there — nothing is
left out, so no ``ref`` is needed and no retrieval can be asked for.

- hits (``path:line:text``, or ``path:text``): consecutive hits of one file under its path,
  each as ``  line: text``;
- a file list (one path a line): one line per directory, ``dir/ (N): name, name, ...``.
A text that is not wholly one of these is not this module's (None).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ember.compress.lines import Kept

#: A hit's path, line number and text. The path may not start with a space; a Windows drive
#: letter is allowed (``C:\x``).
_HIT = re.compile(r"^((?:[A-Za-z]:)?[^\s:][^:]*?):(\d+):(.*)$")
_HIT_NO_LINE = re.compile(r"^((?:[A-Za-z]:)?[^\s:][^:]*?\.[A-Za-z0-9]{1,8}):(.*)$")
_PATH = re.compile(r"^\.?/?[\w.@+-]+(?:/[\w .@+-]+)+/?$|^[\w.@+-]+\.[A-Za-z0-9]{1,8}$")
#: The least share of bytes a regrouping must save to be used.
MIN_SAVING = 0.15
#: Fewer lines than this are left as they are.
MIN_LINES = 20


def regroup(text: str) -> Kept | None:
    """The hits or the file list regrouped, or None (another kind of text, or too little
    gained)."""
    lines = [line for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) < MIN_LINES:
        return None
    for shape in (_hits, _paths):
        out = shape(lines)
        if out is not None and len(out) <= (1 - MIN_SAVING) * len(text):
            return Kept(out, len(lines), 0)
    return None


def _hits(lines: list[str]) -> str | None:
    parsed: list[tuple[str, str]] = []
    for line in lines:
        m = _HIT.match(line)
        if m is not None:
            parsed.append((m.group(1), f"{m.group(2)}:{m.group(3)}"))
            continue
        m = _HIT_NO_LINE.match(line)
        if m is None:
            return None
        parsed.append((m.group(1), m.group(2)))
    return _grouped(parsed, lambda path, items: [path, *(f"  {i}" for i in items)])


def _paths(lines: list[str]) -> str | None:
    if not all(_PATH.match(line) for line in lines):
        return None
    parsed = [(d or ".", name) for d, _, name in (line.rpartition("/") for line in lines)]
    return _grouped(
        parsed, lambda d, names: [f"{d}/ ({len(names)}): {', '.join(names)}"], runs=False
    )


def _grouped(
    pairs: list[tuple[str, str]],
    render: Callable[[str, list[str]], list[str]],
    runs: bool = True,
) -> str:
    """Items under their key: consecutive runs of one key (``runs``), else every key once,
    in first-seen order."""
    out: list[str] = []
    if runs:
        i = 0
        while i < len(pairs):
            key = pairs[i][0]
            j = i
            while j < len(pairs) and pairs[j][0] == key:
                j += 1
            out += render(key, [item for _, item in pairs[i:j]])
            i = j
        return "\n".join(out)
    groups: dict[str, list[str]] = {}
    for key, item in pairs:
        groups.setdefault(key, []).append(item)
    for key, items in groups.items():
        out += render(key, items)
    return "\n".join(out)
