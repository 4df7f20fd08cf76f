"""A long JSON array of records (an API's orders, a query's rows) as its shape and the records
that matter (pure).

The agent rarely needs 400 orders; it needs to know what an order looks like, how many there
are, what the fields range over, and the few it will act on. Kept, each record as it was:
- the first ``FIRST`` and the last ``LAST`` records,
- every record that holds something the conversation names (an id the user asked about, a
  value in the call's own arguments),
- outliers: a number far outside its field's spread, a category value that only a few records
  hold while most share another (the one refunded order among paid ones), the field's min
  and max;
up to ``MAX_KEPT`` records in all, in their original order. Ahead of them a summary line says
how many records there are, each field's type and range or its values with counts, and which
are left out, with the ``ref`` that brings any of them back (``ember_retrieve`` with a query).

The array may be the whole output or one member of a top-level object (``{"orders": [...]}``);
a document that is not such an array is not this module's. Deterministic.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ember.compress.lines import Kept

FIRST = 3
LAST = 2
MAX_KEPT = 25
#: An array shorter than this is left whole.
MIN_RECORDS = 30
#: A category value held by at most this share of the records is an outlier...
RARE_SHARE = 0.02
#: ...when its field has at most this many distinct values (else it is an id, not a category).
MAX_CATEGORIES = 12
#: A number this many median absolute deviations from the median is an outlier.
SPREAD = 6.0


@dataclass(frozen=True)
class _Found:
    path: tuple[str, ...]  # where the array is in the document: () or (key,)
    records: list[dict[str, Any]]


def shorten_records(text: str, ref: str, terms: Sequence[str] = ()) -> Kept | None:
    """The array's shape and chosen records, or None when ``text`` is not a long array of
    records (or nothing would be left out)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        doc = json.loads(stripped)
    except ValueError:
        return None
    found = _array(doc)
    if found is None:
        return None
    records = found.records
    chosen = _choose(records, terms)
    if len(chosen) >= len(records):
        return None
    kept = [records[i] for i in chosen]
    indent = 2 if "\n" in stripped[:200] else None
    body = json.dumps(kept, ensure_ascii=False, indent=indent)
    if found.path:
        body = json.dumps({found.path[0]: kept}, ensure_ascii=False, indent=indent)
    where = f' in "{found.path[0]}"' if found.path else ""
    header = (
        f"[ember: {len(records) - len(chosen)} of {len(records)} records{where} left out; "
        f"ember_retrieve ref={ref} query=<words> brings back the records that hold them]\n"
        f"[ember: fields: {describe(records)}]\n"
        f"[ember: kept records {_ranges(chosen)} (first, last, named in the conversation, "
        "outliers), as they were:]"
    )
    return Kept(f"{header}\n{body}", len(records), len(records) - len(chosen))


def _array(doc: Any) -> _Found | None:
    if _records(doc):
        return _Found((), doc)
    if isinstance(doc, dict):
        lists = [(k, v) for k, v in doc.items() if _records(v)]
        others = [v for v in doc.values() if isinstance(v, list | dict) and not _records(v)]
        if len(lists) == 1 and not others:
            return _Found((lists[0][0],), lists[0][1])
    return None


def _records(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) >= MIN_RECORDS
        and all(isinstance(v, dict) for v in value)
    )


def _choose(records: list[dict[str, Any]], terms: Sequence[str]) -> list[int]:
    n = len(records)
    chosen: dict[int, None] = dict.fromkeys([*range(min(FIRST, n)), *range(max(0, n - LAST), n)])
    texts = [json.dumps(r, ensure_ascii=False).lower() for r in records]
    wanted = [t.lower() for t in terms if len(t) >= 3]
    for i, text in enumerate(texts):
        if any(t in text for t in wanted):
            chosen[i] = None
    for i in _outliers(records):
        chosen[i] = None
    return sorted(chosen)[:MAX_KEPT] if len(chosen) > MAX_KEPT else sorted(chosen)


def _outliers(records: list[dict[str, Any]]) -> list[int]:
    out: list[int] = []
    for field in _fields(records):
        values = [r.get(field) for r in records]
        numbers = [
            (i, float(v))
            for i, v in enumerate(values)
            if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        if len(numbers) >= len(records) // 2 and len(numbers) >= 3:
            out += _far(numbers)
            continue
        labels = [(i, v) for i, v in enumerate(values) if isinstance(v, str | bool)]
        counts = Counter(v for _, v in labels)
        if 1 < len(counts) <= MAX_CATEGORIES:
            rare = {v for v, c in counts.items() if c <= max(1, RARE_SHARE * len(records))}
            out += [i for i, v in labels if v in rare]
    return out


def _far(numbers: list[tuple[int, float]]) -> list[int]:
    """The min, the max, and values far from the median (by median absolute deviation)."""
    values = [v for _, v in numbers]
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    low = min(numbers, key=lambda p: (p[1], p[0]))[0]
    high = max(numbers, key=lambda p: (p[1], -p[0]))[0]
    far = [i for i, v in numbers if mad > 0 and abs(v - median) > SPREAD * mad]
    return [low, high, *far]


def _fields(records: list[dict[str, Any]]) -> list[str]:
    """The records' fields, in first-seen order."""
    return list(dict.fromkeys(k for r in records for k in r))


def describe(records: list[dict[str, Any]]) -> str:
    """Each field's type and range, or its values with counts (a category)."""
    parts = []
    for field in _fields(records)[:20]:
        values = [r[field] for r in records if field in r]
        parts.append(f"{field} {_shape(values, len(records))}")
    more = len(_fields(records)) - 20
    return "; ".join(parts) + (f"; ... {more} more fields" if more > 0 else "")


def _shape(values: list[Any], total: int) -> str:
    present = "" if len(values) == total else f" in {len(values)}"
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if numbers and len(numbers) == len(values):
        return f"(number {min(numbers):g}..{max(numbers):g}{present})"
    labels = Counter(v for v in values if isinstance(v, str | bool))
    if labels and len(labels) <= MAX_CATEGORIES and len(labels) < len(values):
        counted = ", ".join(f"{v} {c}" for v, c in sorted(labels.items(), key=_by_count))
        return f"({counted})"
    kinds = sorted({type(v).__name__ for v in values})
    return f"({'/'.join(kinds)}{present})"


def _by_count(item: tuple[Any, int]) -> tuple[int, str]:
    return (-item[1], str(item[0]))


def _ranges(indices: list[int]) -> str:
    """1-based ranges: ``1-3, 17, 399-400``."""
    out = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start + 1}" if start == prev else f"{start + 1}-{prev + 1}")
        if i is not None:
            start = prev = i
    return ", ".join(out)
