"""Time phrases in an ask ("last week", "on Halloween", "November 13"), as a window of time.

Pure: the ask's words and the moment it was asked in, a ``Window`` (or None) out. The window
lets a search prefer memories from the time the ask names (``rank.window_factor``) and look
for candidates inside it (``search.window_side``): asked "which film did we watch on Halloween
night?", the turn that answers ("A Quiet Place, last night") shares no word with the ask but
its date, and sat at rank 117 of 2,554 turns without one.

Only phrases that name a time are read; a word that is also a verb or a name ("may",
"march", "jan") counts only when a date form makes it one ("in May", "March 3").
A date without a year is the latest such date not after today: memories are of the past.
"Today" and "tonight" name none: what was said today is still in the conversation.
Days are calendar days in ``tz`` (the machine's own zone when None), weeks start on Monday.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

DAY = 86400.0

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_WEEKDAY = "|".join(_WEEKDAYS)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3}  # fmt: skip
_COUNT = "|".join([r"\d{1,2}", *sorted(_NUMBERS, key=len, reverse=True)])
_ORD = r"(?:st|nd|rd|th)?"
#: Month words that are also common English words: a month only inside a date form.
_AMBIGUOUS = frozenset({"may", "march", "mar", "jan", "jun", "aug", "sep", "oct", "nov", "dec"})
_MAX_COUNT = 60

Span = tuple[date, date]  # first day, day after the last


@dataclass(frozen=True)
class Window:
    """``[start, end)`` in epoch seconds, and the words it was read from."""

    start: float
    end: float
    phrase: str

    def distance(self, t: float) -> float:
        """Seconds from ``t`` to the window (0 inside it)."""
        return max(self.start - t, t - self.end, 0.0)

    @property
    def days(self) -> float:
        return (self.end - self.start) / DAY


def _month_span(year: int, month: int) -> Span:
    last = calendar.monthrange(year, month)[1]
    return date(year, month, 1), date(year, month, last) + timedelta(days=1)


def _latest(today: date, month: int, day: int, year: int | None) -> date | None:
    """``month``/``day`` of ``year``, else of the latest year where it is not after today."""
    years = [year] if year is not None else [today.year, today.year - 1]
    for y in years:
        if day > calendar.monthrange(y, month)[1]:
            continue
        d = date(y, month, day)
        if year is not None or d <= today:
            return d
    return None


def _latest_month(today: date, month: int, year: int | None) -> int:
    if year is not None:
        return year
    return today.year if month <= today.month else today.year - 1


def _one_day(d: date | None) -> Span | None:
    return (d, d + timedelta(days=1)) if d is not None else None


def _year(text: str | None) -> int | None:
    return int(text) if text else None


def _month_day(m: re.Match[str], today: date) -> Span | None:
    month = _MONTHS[m["month"].lower()]
    return _one_day(_latest(today, month, int(m["day"]), _year(m["year"])))


def _iso_day(m: re.Match[str], today: date) -> Span | None:
    y, mo, d = int(m["y"]), int(m["m"]), int(m["d"])
    if not 1 <= mo <= 12 or not 1 <= d <= calendar.monthrange(y, mo)[1]:
        return None
    return _one_day(date(y, mo, d))


def _part_of_month(m: re.Match[str], today: date) -> Span | None:
    """Early: days 1-10, mid: 11-20, late: 21 to the end."""
    month = _MONTHS[m["month"].lower()]
    first, after = _month_span(_latest_month(today, month, _year(m["year"])), month)
    part = m["part"].lower()
    if part.startswith(("early", "beginning", "start")):
        return first, first + timedelta(days=10)
    if part.startswith(("mid", "middle")):
        return first + timedelta(days=10), first + timedelta(days=20)
    return first + timedelta(days=20), after


def _month(m: re.Match[str], today: date) -> Span | None:
    word = m["month"].lower()
    lead = (m["lead"] or "").lower()
    if word in _AMBIGUOUS and not (lead in ("in", "during", "last") or m["year"]):
        return None  # "this may take a while", "we march on"
    month = _MONTHS[word]
    if lead == "last" and m["year"] is None:
        return _month_span(today.year - 1 if month >= today.month else today.year, month)
    return _month_span(_latest_month(today, month, _year(m["year"])), month)


def _thanksgiving(year: int) -> date:
    """The fourth Thursday of November (the US holiday)."""
    first = date(year, 11, 1)
    return first + timedelta(days=(3 - first.weekday()) % 7 + 21)


_HOLIDAYS: dict[str, Callable[[int], date]] = {
    "new year's eve": lambda y: date(y, 12, 31),
    "new year's day": lambda y: date(y, 1, 1),
    "valentine's day": lambda y: date(y, 2, 14),
    "independence day": lambda y: date(y, 7, 4),
    "fourth of july": lambda y: date(y, 7, 4),
    "halloween": lambda y: date(y, 10, 31),
    "thanksgiving": _thanksgiving,
    "christmas eve": lambda y: date(y, 12, 24),
    "christmas": lambda y: date(y, 12, 25),
}
_HOLIDAY = "|".join(
    re.escape(h).replace("'", "['’]?") for h in sorted(_HOLIDAYS, key=len, reverse=True)
)


def _holiday(m: re.Match[str], today: date) -> Span | None:
    name = m["name"].lower().replace("’", "'")
    name = next(h for h in _HOLIDAYS if h.replace("'", "") == name.replace("'", ""))
    when = _HOLIDAYS[name]
    d = when(today.year)
    return _one_day(d if d <= today else when(today.year - 1))


def _relative_day(m: re.Match[str], today: date) -> Span | None:
    word = m["word"].lower()
    back = 2 if word.startswith("the day before") else 1
    return _one_day(today - timedelta(days=back))


def _ago(m: re.Match[str], today: date) -> Span | None:
    """ "3 days ago": that day; "two weeks ago": the week around that day; months and years
    ago: that calendar month or year."""
    count = m["count"].lower()
    n = int(count) if count.isdigit() else _NUMBERS[count]
    unit = m["unit"].lower()
    if not 1 <= n <= _MAX_COUNT:
        return None
    if unit == "day":
        return _one_day(today - timedelta(days=n))
    if unit == "week":
        mid = today - timedelta(days=7 * n)
        return mid - timedelta(days=3), mid + timedelta(days=4)
    if unit == "month":
        index = today.year * 12 + today.month - 1 - n
        return _month_span(index // 12, index % 12 + 1)
    return date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1)


def _weekday(m: re.Match[str], today: date) -> Span | None:
    """The latest such day before today ("on Monday", "last Monday")."""
    back = (today.weekday() - _WEEKDAYS[m["day"].lower()]) % 7 or 7
    return _one_day(today - timedelta(days=back))


def _period(m: re.Match[str], today: date) -> Span | None:
    """this/last week (Monday-based), month, year; the past week/month: the days up to today."""
    which, unit = m["which"].lower(), m["unit"].lower()
    tomorrow = today + timedelta(days=1)
    if which == "past" or which.startswith(("the past", "the last")):
        return tomorrow - timedelta(days={"week": 7, "month": 30, "year": 365}[unit]), tomorrow
    back = 0 if which == "this" else 1
    if unit == "week":
        monday = today - timedelta(days=today.weekday() + 7 * back)
        return monday, monday + timedelta(days=7)
    if unit == "month":
        index = today.year * 12 + today.month - 1 - back
        return _month_span(index // 12, index % 12 + 1)
    return date(today.year - back, 1, 1), date(today.year - back + 1, 1, 1)


def _in_year(m: re.Match[str], today: date) -> Span | None:
    """That year; "since 2016": from its first day to today."""
    y = int(m["y"])
    if not 1970 <= y <= today.year:
        return None
    after = today + timedelta(days=1) if m["lead"].lower() == "since" else date(y + 1, 1, 1)
    return date(y, 1, 1), after


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])" + pattern + r"(?![\w-])", re.IGNORECASE)


_YEAR = r"(?:,?\s+(?P<year>(?:19|20)\d{2}))?"
_PART = r"(?P<part>early|mid|middle of|late|end of|beginning of|start of)"
#: Today's own words ("today", "tonight", "this morning") name no window: what was said today
#: is still in the conversation, and "let's ship it tonight" asks for no memory from today
#: over a durable fact from last month.
_RELATIVE_DAY = "the day before yesterday|yesterday|last night"
_PERIOD_WHICH = "this|last|previous|past|the past|the last"
Resolver = Callable[[re.Match[str], date], Span | None]
#: Tried in order; a later pattern never reads words an earlier one used.
_PHRASES: tuple[tuple[re.Pattern[str], Resolver], ...] = (
    (_rx(r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})"), _iso_day),
    (_rx(rf"{_PART}[\s-]+(?P<month>{_MONTH})\.?{_YEAR}"), _part_of_month),
    (_rx(rf"(?P<month>{_MONTH})\.?\s+(?:the\s+)?(?P<day>\d{{1,2}}){_ORD}{_YEAR}"), _month_day),
    (
        _rx(rf"(?:the\s+)?(?P<day>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<month>{_MONTH})\.?{_YEAR}"),
        _month_day,
    ),
    (_rx(rf"(?P<name>{_HOLIDAY})"), _holiday),
    (_rx(rf"(?P<word>{_RELATIVE_DAY})"), _relative_day),
    (_rx(rf"(?P<count>{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago"), _ago),
    (_rx(rf"(?P<which>{_PERIOD_WHICH})\s+(?P<unit>week|month|year)"), _period),
    (_rx(rf"(?:(?:last|on|this past)\s+)?(?P<day>{_WEEKDAY})"), _weekday),
    (_rx(rf"(?:(?P<lead>in|during|last|this)\s+)?(?P<month>{_MONTH}){_YEAR}"), _month),
    (_rx(r"(?P<lead>in|during|since)\s+(?P<y>(?:19|20)\d{2})"), _in_year),
)


def _spans(text: str, today: date) -> Iterator[tuple[Span, str]]:
    taken: list[tuple[int, int]] = []
    for pattern, resolve in _PHRASES:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            span = resolve(m, today)
            if span is None:
                continue
            taken.append((m.start(), m.end()))
            # "Today's date is ..." in a client's preamble: today names no window.
            if span != _one_day(today):
                yield span, m.group().strip()


def _epoch(d: date, tz: tzinfo | None) -> float:
    return datetime.combine(d, time(), tzinfo=tz).timestamp()


def ask_window(text: str, now: float, tz: tzinfo | None = None) -> Window | None:
    """The time ``text`` names, relative to ``now``: from the earliest to the latest day any
    of its time phrases names (so "between May 3 and May 10" is that week); None when it
    names none. ``tz`` decides where a day starts (None: the machine's zone)."""
    today = datetime.fromtimestamp(now, tz).date()
    found = list(_spans(text, today))
    if not found:
        return None
    first = min(s[0] for s, _ in found)
    after = max(s[1] for s, _ in found)
    phrase = ", ".join(p for _, p in found)
    return Window(_epoch(first, tz), _epoch(after, tz), phrase)
