"""Level resolution: env > controller > learned > default 2, with the source."""

from __future__ import annotations

from ember.shaping.levels import resolve_level


def test_precedence_and_source() -> None:
    r = resolve_level(4, 1, 3)
    assert (r.level, r.source) == (4, "env")
    r = resolve_level(None, 1, 3)
    assert (r.level, r.source) == (1, "controller")
    r = resolve_level(None, None, 3)
    assert (r.level, r.source) == (3, "learned")
    r = resolve_level(None, None, None)
    assert (r.level, r.source) == (2, "default")


def test_env_zero_is_a_choice_not_a_missing_value() -> None:
    r = resolve_level(0, 3, 3)
    assert (r.level, r.source) == (0, "env")


def test_out_of_range_values_fall_through() -> None:
    r = resolve_level(None, 7, 5)
    assert (r.level, r.source) == (2, "default")
