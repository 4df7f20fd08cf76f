"""``ember_retrieve``: what ember left out of a tool output, brought back by the proxy.

Offered in the tool list from a conversation's first request (fixed bytes: it never moves the
cached prefix) and run by ember itself: the client never sees the call. It returns as little
as the model asks for — a line range, the lines or records holding some words — since what it
returns is fresh input at full price; the whole original only when asked for nothing narrower
(and at most ``MAX_CHARS`` of it).

Fail closed: a ref is looked up in the project's own database only, so a ref of another
project, one that was pruned, or one the model made up gets a tool error saying so, never
another project's output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ember.compress.ledger import OutputLedger
from ember.protocols.tooling import ToolSpec
from ember.tokens import count_tokens

NAME = "ember_retrieve"
#: The most characters one retrieval returns.
MAX_CHARS = 60_000

SPEC = ToolSpec(
    NAME,
    (
        "Bring back what ember left out of a long tool output. Where an output says "
        "[ember: ... left out; ember_retrieve ref=<ref> ...], call this with that ref and "
        'either lines (e.g. "120-180": those lines exactly as the tool printed them) or '
        "query (words: the lines or records that hold them). With neither, the whole "
        "original comes back: ask for what you need instead, it is shorter."
    ),
    {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "The ref from the [ember: ...] line."},
            "lines": {"type": "string", "description": 'A line range, e.g. "120-180".'},
            "query": {"type": "string", "description": "Words the lines or records hold."},
        },
        "required": ["ref"],
    },
)

_REF = re.compile(r"^c[0-9a-f]{10}$")
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


class Retrieval:
    """The tool for one project's database (``ember.exchange.OwnedTools``)."""

    def __init__(self, ledger: OutputLedger, db: Path) -> None:
        self.ledger = ledger
        self.db = db

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return (SPEC,)

    async def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        if name != NAME:
            return f"unknown tool {name!r}", True
        args = arguments if isinstance(arguments, dict) else {}
        ref = args.get("ref")
        if not isinstance(ref, str) or not _REF.match(ref.strip()):
            return (
                f"{NAME}: 'ref' must be the ref an [ember: ...] line gives (like c0123abcd45), "
                f"got {ref!r}",
                True,
            )
        original = await self.ledger.original(self.db, ref.strip())
        if original is None:
            return (
                f"{NAME}: no output with ref {ref.strip()} in this project: it was never "
                "shortened here, or it has been pruned (originals are kept a limited time). "
                "Run the tool again if you need its output.",
                True,
            )
        text, is_error = select(original.text, original.how, args.get("lines"), args.get("query"))
        if not is_error:
            self.ledger.retrieved(self.db, original.ref, count_tokens(text))
        return text, is_error


def select(text: str, how: str, lines: Any, query: Any) -> tuple[str, bool]:
    """What one retrieval returns of ``text`` (pure): a line range, the lines (or, for
    records, the records) holding the query's words, or the whole text, at most
    ``MAX_CHARS``."""
    if isinstance(lines, str) and lines.strip():
        return _range(text, lines)
    if isinstance(query, str) and query.strip():
        words = [w.lower() for w in query.split() if w.strip()]
        found = _records(text, words) if how == "records" else _lines(text, words)
        return (found or f"{NAME}: nothing in the output holds {query.strip()!r}"), not found
    return _capped(text), False


def _range(text: str, spec: str) -> tuple[str, bool]:
    m = _RANGE.match(spec)
    all_lines = text.split("\n")
    if m is None:
        return f'{NAME}: lines must look like "120-180", got {spec!r}', True
    first = int(m.group(1))
    last = int(m.group(2) or m.group(1))
    if first < 1 or last < first or first > len(all_lines):
        return f"{NAME}: the output has lines 1-{len(all_lines)}; {spec!r} is not among them", True
    picked = all_lines[first - 1 : min(last, len(all_lines))]
    return _capped("\n".join(picked)), False


def _lines(text: str, words: list[str]) -> str:
    all_lines = text.split("\n")
    keep: set[int] = set()
    for i, line in enumerate(all_lines):
        low = line.lower()
        if all(w in low for w in words):
            keep.update(range(max(0, i - 1), min(len(all_lines), i + 2)))
    out: list[str] = []
    last = -2
    for i in sorted(keep):
        if i != last + 1 and out:
            out.append("...")
        out.append(f"{i + 1}: {all_lines[i]}")
        last = i
    return _capped("\n".join(out)) if out else ""


def _records(text: str, words: list[str]) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return _lines(text, words)
    records = (
        doc
        if isinstance(doc, list)
        else next((v for v in doc.values() if isinstance(v, list)), [])
        if isinstance(doc, dict)
        else []
    )
    found = [
        r for r in records if all(w in json.dumps(r, ensure_ascii=False).lower() for w in words)
    ]
    return _capped(json.dumps(found, ensure_ascii=False, indent=2)) if found else ""


def _capped(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    return (
        text[:MAX_CHARS]
        + f"\n[{NAME}: {len(text) - MAX_CHARS} more characters not shown; ask for a line range "
        "or a query]"
    )
