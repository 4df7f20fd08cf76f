"""The observers' books stay bounded, and evict the least recently set entry first."""

from __future__ import annotations

from ember.bounded import Bounded


def test_setting_makes_an_entry_newest_and_the_oldest_goes_past_the_limit() -> None:
    table: Bounded[str, int] = Bounded(2)
    table.put("a", 1)
    table.put("b", 2)
    table.put("a", 3)  # a is newest now
    table.put("c", 4)
    assert list(table.items()) == [("a", 3), ("c", 4)]


def test_first_sight_is_true_once_and_does_not_refresh_a_known_key() -> None:
    seen: Bounded[str, None] = Bounded(2)
    assert seen.first_sight("x", None)
    assert not seen.first_sight("x", None)
    seen.first_sight("y", None)
    seen.first_sight("x", None)  # known: keeps its (oldest) place
    seen.first_sight("z", None)
    assert list(seen) == ["y", "z"]
