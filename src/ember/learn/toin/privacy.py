"""What TOIN keeps of a tool call and its output: structure, never values (pure).

Private by not storing, rather than by filtering what was stored:

| seen                     | kept                                                        |
|--------------------------|-------------------------------------------------------------|
| the output's data        | nothing; only its size, and whether it was an error          |
| the tool's name          | only inside the structure hash                              |
| field names of JSON      | the first 8 hex digits of their SHA-256                     |
| the call's arguments     | only a hash of them, in memory, to notice a re-fetch         |
| a query string argument  | its ``field:value`` predicates as ``<hash of field>:*``;     |
|                          | free text (a prompt, a search phrase) is dropped entirely   |
| who made the call        | nothing                                                     |

Keeping a free-text query as it was would persist prompts verbatim (and make keys megabytes
long). The structure of a text output is its *shape* -- grep-style ``path:line:`` lines,
numbered lines, a diff, a listing -- told from its layout, never its words.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Parse at most this much of an output as JSON to read its structure.
MAX_JSON_BYTES = 1_000_000
#: Field names kept per structure (the most common first).
MAX_FIELDS = 64
#: Lines looked at to tell a text output's shape.
SHAPE_LINES = 50
#: Call arguments whose string value is a query to reduce to its predicates.
QUERY_ARGS = frozenset({"query", "q", "filter", "search", "jql", "expression"})

_PREDICATE = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]{0,63}):(?:\"[^\"]*\"|\S+)")
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("diff", re.compile(r"^(?:@@ |diff --git |\+\+\+ |--- )")),
    ("grep", re.compile(r"^[^\s:]+:\d+[:-]")),
    ("numbered", re.compile(r"^\s*\d+(?:→|\t|: |\| )")),
    ("listing", re.compile(r"^(?:[drwxl-]{10}\s|total \d+$|[├└│])")),
)


def hash_name(name: str) -> str:
    """A field or tool name as TOIN keeps it: 8 hex digits of its SHA-256."""
    return hashlib.sha256(name.encode("utf-8", errors="surrogatepass")).hexdigest()[:8]


@dataclass(frozen=True)
class Structure:
    """An output's kind (``json-object``, ``json-array``, ``text:<shape>``, ``empty``), its
    structure hash (over the hashed tool name, the kind and the hashed field layout) and the
    hashed field names it carried."""

    kind: str
    hash: str
    fields: tuple[str, ...]


def _json_layout(value: Any) -> tuple[str, tuple[str, ...]]:
    """(layout, hashed field names): top-level keys with their value types, or for an array
    the layout of its first element. Values themselves never enter."""
    if isinstance(value, list):
        inner, fields = _json_layout(value[0]) if value else ("", ())
        return f"[{inner}]", fields
    if isinstance(value, dict):
        pairs = sorted((hash_name(str(k)), type(v).__name__) for k, v in value.items())
        fields = tuple(h for h, _ in pairs[:MAX_FIELDS])
        return "{" + ",".join(f"{h}:{t}" for h, t in pairs) + "}", fields
    return type(value).__name__, ()


def _text_shape(text: str) -> str:
    lines = [ln for ln in text.splitlines()[:SHAPE_LINES] if ln.strip()]
    for shape, pattern in _SHAPES:
        if lines and sum(1 for ln in lines if pattern.search(ln)) * 2 >= len(lines):
            return shape
    return "lines" if len(lines) > 1 else "line"


def structure_of(tool_name: str | None, output: str) -> Structure:
    """The structure of one tool output (``tool_name`` None: the call was not seen)."""
    tool = hash_name(tool_name) if tool_name else "?"
    stripped = output.strip()
    fields: tuple[str, ...] = ()
    if not stripped:
        kind, layout = "empty", ""
    else:
        kind, layout = "", ""
        if stripped[0] in "[{" and len(stripped) <= MAX_JSON_BYTES:
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            if isinstance(value, dict | list):
                kind = "json-object" if isinstance(value, dict) else "json-array"
                layout, fields = _json_layout(value)
        if not kind:
            kind = "text:" + _text_shape(stripped)
    digest = hashlib.sha256(f"{tool}|{kind}|{layout}".encode()).hexdigest()[:16]
    return Structure(kind, digest, fields)


def query_pattern(text: str) -> str | None:
    """A query reduced to its structure: ``status:open author:"x y"`` -> ``<h(status)>:*
    <h(author)>:*``; None when it has no ``field:value`` predicate (free text is dropped)."""
    fields = [hash_name(m.group(1).lower()) for m in _PREDICATE.finditer(text[:4096])]
    return " ".join(f"{f}:*" for f in fields[:16]) or None


def query_patterns(arguments: Any) -> list[str]:
    """The query patterns of a call's arguments (only the ``QUERY_ARGS`` string values)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return []
    if not isinstance(arguments, Mapping):
        return []
    out: list[str] = []
    for name, value in arguments.items():
        if str(name).lower() in QUERY_ARGS and isinstance(value, str):
            pattern = query_pattern(value)
            if pattern is not None:
                out.append(pattern)
    return out


def call_signature(tool_name: str | None, arguments: Any) -> str:
    """A digest of the call (tool and canonical arguments): the same call made again in a
    session is a re-fetch. Held in memory only, never stored."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    canonical = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    )
    return hashlib.sha256(f"{tool_name}\0{canonical}".encode(errors="surrogatepass")).hexdigest()
