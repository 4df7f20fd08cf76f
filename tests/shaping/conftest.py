"""Shaping's state for tests: the home's stats.db, with one owner per home (as in a proxy);
``state_for`` runs each test on SQLite and on a PostgreSQL store (its ``ember_home``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.shaping.state import ShapingState
from ember.store.registry import Storage


class StateFor:
    """``state_for(home)``: shaping's state of ``home`` (one owner per home, as in a proxy);
    ``store_url``: the PostgreSQL store it is kept in (None: the home's stats.db), for a
    command run on the same data."""

    def __init__(self, store_url: str | None) -> None:
        self.store_url = store_url
        self.opened: dict[Path, Storage] = {}

    def __call__(self, home: Path) -> ShapingState:
        storage = self.opened.get(home) or self.opened.setdefault(
            home, Storage(home, vec=False, store_url=self.store_url)
        )
        return ShapingState(home, storage.stats)

    def env(self) -> dict[str, str]:
        """What a command needs in its environment to read the same data."""
        return {} if self.store_url is None else {"EMBER_STORE_URL": self.store_url}


def _states(store_url: str | None) -> Iterator[StateFor]:
    states = StateFor(store_url)
    yield states
    for storage in states.opened.values():
        storage.close()


@pytest.fixture(params=["sqlite", "postgres"])
def state_for(request: pytest.FixtureRequest) -> Iterator[StateFor]:
    """``state_for(home)``: shaping's state of ``home``, its database closed at the end. On
    PostgreSQL every home of the test shares the test's one database (``ember_home``)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    yield from _states(url)


@pytest.fixture
def file_state_for() -> Iterator[StateFor]:
    """``state_for`` on SQLite only: for what only files do (a home that is a file)."""
    yield from _states(None)
