"""One tool output shortened the way its kind allows (pure): a JSON array of records, search
hits or a file list, or lines of a log.

``policy.judge`` says how far ember may go; this picks the shortening for the text: records
for a long JSON array (lossy), a regrouping for hits and file lists (lossless), else the lines
worth acting on (lossy). A shortening is used only when it saves enough (``MIN_SAVING`` of the
characters: below that, the marker lines and the cost of a retrieval the model may ask for
are not worth it); the same text, ref and terms always give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ember.compress.lines import shorten_lines
from ember.compress.listing import regroup
from ember.compress.records import shorten_records

#: The least share of characters a lossy shortening must save.
MIN_SAVING = 0.3

How = Literal["records", "regrouped", "lines"]


@dataclass(frozen=True)
class Shortened:
    text: str
    how: How
    #: lines (or records) the original had, and how many of them were left out
    units: int
    left_out: int


def shorten(
    text: str, how: Literal["lossy", "lossless"], ref: str, terms: Sequence[str] = ()
) -> Shortened | None:
    """``text`` shortened, or None when nothing worth it can be done."""
    lossy = how == "lossy"
    if lossy:
        records = shorten_records(text, ref, terms)
        if records is not None:
            return _worth(text, Shortened(records.text, "records", records.lines, records.left_out))
    regrouped = regroup(text)
    if regrouped is not None:
        return Shortened(regrouped.text, "regrouped", regrouped.lines, 0)
    if lossy:
        kept = shorten_lines(text, ref, terms)
        if kept is not None:
            return _worth(text, Shortened(kept.text, "lines", kept.lines, kept.left_out))
    return None


def _worth(text: str, s: Shortened) -> Shortened | None:
    return s if len(s.text) <= (1 - MIN_SAVING) * len(text) else None
