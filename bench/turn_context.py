"""Context for short turns (issue #10): what each turn is embedded with, per variant.

A variant names the context joined to a turn's own text in its *embedding input*; the stored
content (what search returns, what FTS5 and the keyword share see) stays the turn's text,
unless the variant ends in ``@fts``, which stores the joined text as the content (so the
keyword side sees the context too). Grammar, parts joined with ``+``:

* ``none``: the turn alone (what ember does today);
* ``prev``: the previous turn of the same session (log file, conversation), its last
  ``words`` words; ``prev<N``: only for turns of fewer than N words;
* ``date``: the session's date as text (``2026-05-28``) from the turn's ``created_at``;
* suffix ``@end``: the context after the turn instead of before it; ``@fts``: see above;
  ``@mixW``: not joined: the turn and its context embedded apart, the vector
  ``unit(turn + W x context)`` (the context's pull on a short turn bounded by W).

    none, prev<8, prev<16, prev, date, date+prev<16, prev<16@end, prev<16@fts, prev<8@mix0.3
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memory_sets import Turn

_PREV = re.compile(r"prev(?:<(\d+))?$")


@dataclass(frozen=True)
class Variant:
    name: str
    prev_below: int | None = None  # words; 0 = never, None = always
    date: bool = False
    end: bool = False
    fts: bool = False
    mix: float | None = None

    @property
    def is_none(self) -> bool:
        return self.prev_below == 0 and not self.date


def parse(name: str) -> Variant:
    """``prev<16@end`` -> Variant; ValueError on anything else."""
    body, *mods = name.strip().split("@")
    mix = [float(m[3:]) for m in mods if re.fullmatch(r"mix\d*\.?\d+", m)]
    if any(m not in ("end", "fts") and not m.startswith("mix") for m in mods) or (
        len(mix) != sum(m.startswith("mix") for m in mods)
    ):
        raise ValueError(f"context {name!r}: modifiers are @end, @fts and @mixW")
    prev: int | None = 0
    date = False
    for part in body.split("+"):
        if part == "none":
            continue
        if part == "date":
            date = True
            continue
        m = _PREV.match(part)
        if not m:
            raise ValueError(f"context {name!r}: parts are none, date, prev, prev<N")
        prev = int(m.group(1)) if m.group(1) else None
    return Variant(name.strip(), prev, date, "end" in mods, "fts" in mods, mix[0] if mix else None)


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def contexts(turns: Sequence[Turn], v: Variant, words: int = 32) -> list[str]:
    """Each turn's context text ("" for none), the previous turn taken in list order."""
    out: list[str] = []
    last: dict[str, str] = {}
    for t in turns:
        parts = [_day(t.created_at)] if v.date else []
        prev = last.get(t.session)
        short = v.prev_below is None or len(t.text.split()) < v.prev_below
        if v.prev_below != 0 and short and prev is not None:
            parts.append(" ".join(prev.split()[-words:]))
        out.append("\n".join(parts))
        last[t.session] = t.text
    return out


def joined(text: str, context: str, v: Variant) -> str:
    """The turn's text with its context, in the variant's order."""
    if not context:
        return text
    return f"{text}\n{context}" if v.end else f"{context}\n{text}"
