"""The PostgreSQL store's tests: ``server`` is the test database behind a loopback port a test
can close, open and freeze (``relay``), the server "down" and "back" on one URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.store.pg.relay import Relay, relay


@pytest.fixture
def server(pg_url: str) -> Iterator[Relay]:
    with relay(pg_url) as r:
        yield r
