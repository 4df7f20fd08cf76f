"""The dashboard's reads (``ember.ui.data``) give the same days on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.store.database import Database
from ember.ui import data
from tests.shadow.backends import BACKENDS, project_db
from tests.shadow.test_spend import insert, record

DAY = 20_792  # 2026-12-05 (UTC)


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    database = project_db(request.param, tmp_path, request)
    yield database
    database.close()


def test_a_request_is_counted_on_its_own_utc_day_at_any_hour(db: Database) -> None:
    """PostgreSQL's CAST rounds where SQLite's truncates: a request made after noon was
    counted on the next day there, and fell out of the page's window."""
    start = DAY * data.DAY
    hours = (0.0, 11.9, 12.0, 13.5, 23.999)
    insert(db, [record(start + h * 3600, "client", "anthropic", 0.01, 100) for h in hours])
    insert(db, [record(start - 1.0, "client", "anthropic", 0.01, 100)])  # the day before
    rows = db.read(lambda c: data.daily(c, since=start - 86_400))
    by_day = {int(r["day"]): r["requests"] for r in rows}
    assert by_day == {DAY - 1: 1, DAY: len(hours)}
    assert all(isinstance(r["day"], int) for r in rows)  # Spend.add indexes a list with it
