"""Shaping's state for tests: the home's stats.db, with one owner per home (as in a proxy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ember.shaping.state import ShapingState
from ember.store.registry import Storage

StateFor = Callable[[Path], ShapingState]


@pytest.fixture
def state_for() -> Iterator[StateFor]:
    """``state_for(home)``: shaping's state of ``home``, its stats.db closed at the end."""
    opened: dict[Path, Storage] = {}

    def make(home: Path) -> ShapingState:
        storage = opened.get(home) or opened.setdefault(home, Storage(home, vec=False))
        return ShapingState(home, storage.stats)

    yield make
    for storage in opened.values():
        storage.close()
