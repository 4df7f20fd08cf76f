"""Time phrases in an ask, read as the window of days they name."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from ember.memory.retrieval.timeframe import DAY, Window, ask_window

#: Thursday 15 November 2018, late afternoon (UTC).
NOW = datetime(2018, 11, 15, 17, 49, tzinfo=UTC).timestamp()


def days(text: str, now: float = NOW) -> tuple[date, date] | None:
    """The window as (first day, last day), or None."""
    w = ask_window(text, now, UTC)
    if w is None:
        return None
    first = datetime.fromtimestamp(w.start, UTC).date()
    return first, datetime.fromtimestamp(w.end, UTC).date() - timedelta(days=1)


def d(month: int, day: int, year: int = 2018) -> date:
    return date(year, month, day)


@pytest.mark.parametrize(
    ("ask", "first", "last"),
    [
        ("Which film did we watch on Halloween night?", d(10, 31), d(10, 31)),
        ("what did we fix yesterday", d(11, 14), d(11, 14)),
        ("what did you say last night", d(11, 14), d(11, 14)),
        ("the day before yesterday", d(11, 13), d(11, 13)),
        ("3 days ago", d(11, 12), d(11, 12)),
        ("a couple of weeks ago", d(10, 29), d(11, 4)),
        ("last week", d(11, 5), d(11, 11)),  # Monday to Sunday
        ("this week", d(11, 12), d(11, 18)),
        ("in the past week", d(11, 9), d(11, 15)),
        ("last month", d(10, 1), d(10, 31)),
        ("in October", d(10, 1), d(10, 31)),
        ("in early November", d(11, 1), d(11, 10)),
        ("mid-October", d(10, 11), d(10, 20)),
        ("late Sept", d(9, 21), d(9, 30)),
        ("on November 13", d(11, 13), d(11, 13)),
        ("Nov. 14th", d(11, 14), d(11, 14)),
        ("the 2nd of November", d(11, 2), d(11, 2)),
        ("2018-11-02 deploy log", d(11, 2), d(11, 2)),
        ("on Monday", d(11, 12), d(11, 12)),
        ("last Thursday", d(11, 8), d(11, 8)),  # today is Thursday: the one before
        ("October 2017", d(10, 1, 2017), d(10, 31, 2017)),
        ("in 2017", d(1, 1, 2017), d(12, 31, 2017)),
        ("since 2017", d(1, 1, 2017), d(11, 15)),
        ("between November 3 and November 10", d(11, 3), d(11, 10)),
    ],
)
def test_time_phrases_name_these_days(ask: str, first: date, last: date) -> None:
    assert days(ask) == (first, last)


def test_a_date_without_a_year_is_the_latest_one_not_after_today() -> None:
    """Memories are of the past: "in December" asked in November is last December, and
    Christmas asked in November is last year's."""
    assert days("in December") == (d(12, 1, 2017), d(12, 31, 2017))
    assert days("at Christmas") == (d(12, 25, 2017), d(12, 25, 2017))
    assert days("on Thanksgiving") == (d(11, 23, 2017), d(11, 23, 2017))
    new_year = datetime(2019, 1, 2, 9, 0, tzinfo=UTC).timestamp()
    assert days("on December 30", new_year) == (d(12, 30, 2018), d(12, 30, 2018))
    assert days("last week", new_year) == (d(12, 24, 2018), d(12, 30, 2018))


@pytest.mark.parametrize(
    "ask",
    [
        "When did Tyler have his linear algebra exam?",  # asks for a time, names none
        "this may take a while",
        "we march on",
        "Jan said the build is green",
        "Mondays are for planning",
        "the dec file",
        "version 2018-13-45",
        "what changed in the last release",
        "let's ship it tonight",  # today is still in the conversation: no window
        "what should we do today",
        "Today's date is 2018-11-15. Fix the failing test",  # a client's preamble
        "on November 15",  # today, however it is written
    ],
)
def test_words_that_only_look_like_time_name_none(ask: str) -> None:
    assert ask_window(ask, NOW, UTC) is None


def test_a_day_the_month_does_not_have_still_names_the_month() -> None:
    assert days("on November 31") == (d(11, 1), d(11, 30))


def test_ambiguous_month_words_count_inside_a_date_form() -> None:
    assert days("in May") == (d(5, 1), d(5, 31))
    assert days("May 3") == (d(5, 3), d(5, 3))
    assert days("march 2017") == (d(3, 1, 2017), d(3, 31, 2017))


def test_a_day_starts_in_the_zone_asked_in() -> None:
    """At 01:00 UTC on the 15th it is still the 14th in New York: "yesterday" is the 13th."""
    now = datetime(2018, 11, 15, 1, 0, tzinfo=UTC).timestamp()
    new_york = timezone(timedelta(hours=-5))
    w = ask_window("yesterday", now, new_york)
    assert w is not None
    assert datetime.fromtimestamp(w.start, new_york) == datetime(2018, 11, 13, tzinfo=new_york)
    assert w.days == pytest.approx(1.0)


def test_distance_is_zero_inside_and_seconds_outside() -> None:
    w = Window(1000.0, 1000.0 + DAY, "x")
    assert w.distance(1000.0) == 0.0
    assert w.distance(1000.0 + DAY / 2) == 0.0
    assert w.distance(1000.0 + DAY + 60) == pytest.approx(60.0)
    assert w.distance(400.0) == pytest.approx(600.0)


def test_the_phrase_says_what_was_read() -> None:
    w = ask_window("what did Brian eat for lunch on Halloween?", NOW, UTC)
    assert w is not None and w.phrase == "Halloween"
