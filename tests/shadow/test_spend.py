"""The budget window read from the hourly sums gives what summing the rows themselves gives."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ember.protocols.base import Usage
from ember.shadow import spend
from ember.shadow.spend_share import WEIGHTS, WINDOW_SECONDS, Spend
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.migrations import Schema
from ember.store.schema import PROJECT
from tests.shadow.backends import BACKENDS, project_db

NOW = 1_790_000_000.0  # not on an hour boundary: the window starts mid-hour
ORIGINS = ("client", "client", "shadow", "steward", "tool")  # "tool": counted by neither side


def record(ts: float, origin: str, protocol: str, cost: float | None, n: int) -> ExchangeRecord:
    usage = Usage(input_tokens=n, output_tokens=n // 3 + 1, cache_read_tokens=10 * n,
                  cache_write_tokens=2 * n, cache_write_1h_tokens=n // 2)  # fmt: skip
    return ExchangeRecord(ts, "s", "/p", protocol, "m", 200, "ok", False, usage, cost, "snap",
                          1.0, None, origin=origin)  # fmt: skip


def rows_around_the_window(seed: int, count: int = 400) -> list[ExchangeRecord]:
    """Rows from a day before the window to just after now, some right at its edges and at
    hour boundaries, of every origin and both protocols, a few without a price."""
    rng = random.Random(seed)
    since = NOW - WINDOW_SECONDS
    edges = [since, since - 1e-6, since + 1e-6, (since // 3600 + 1) * 3600, NOW, NOW - 3600]
    out = []
    for i in range(count):
        ts = edges[i % len(edges)] if i % 7 == 0 else rng.uniform(since - 86_400, NOW + 60)
        cost = None if rng.random() < 0.03 else rng.uniform(0, 0.05)
        out.append(record(ts, rng.choice(ORIGINS), rng.choice(("anthropic", "openai")), cost,
                          rng.randint(0, 5000)))  # fmt: skip
    return out


def by_hand(records: Sequence[ExchangeRecord]) -> tuple[Spend, Spend]:
    """The window as the definition says: every row of the last 7 days, summed in Python."""
    sides: dict[bool, list[ExchangeRecord]] = {False: [], True: []}
    for r in records:
        if r.ts >= NOW - WINDOW_SECONDS and r.origin in ("client", *spend.EXTRACTION):
            sides[r.origin in spend.EXTRACTION].append(r)

    def total(rs: list[ExchangeRecord]) -> Spend:
        usd = None if any(r.cost_usd is None for r in rs) else sum(r.cost_usd or 0 for r in rs)
        tokens = 0.0
        for r in rs:
            w, u = WEIGHTS[r.protocol], r.usage or Usage()
            tokens += (u.input_tokens + u.cache_read_tokens * w.cache_read
                       + (u.cache_write_tokens - u.cache_write_1h_tokens) * w.cache_write
                       + u.cache_write_1h_tokens * w.cache_write_1h
                       + u.output_tokens * w.output)  # fmt: skip
        return Spend(usd, tokens)

    return total(sides[False]), total(sides[True])


def close(a: Spend, b: Spend) -> bool:
    same_usd = a.usd == b.usd or (None not in (a.usd, b.usd) and a.usd == pytest.approx(b.usd))
    return same_usd and a.tokens == pytest.approx(b.tokens)


def insert(db: Database, records: Sequence[ExchangeRecord]) -> None:
    def job(conn: object) -> None:
        for r in records:
            r.insert(conn)  # type: ignore[arg-type]

    db.write(job)


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A project database on either backend: the window must sum the same rows on both
    (PostgreSQL's spend_hours puts a row in its hour with floor, not SQLite's CAST)."""
    database = project_db(request.param, tmp_path, request)
    yield database
    database.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_window_is_the_sum_of_its_rows(db: Database, seed: int) -> None:
    records = rows_around_the_window(seed)
    insert(db, records)
    got = db.read(lambda c: spend.window(c, NOW))
    want = by_hand(records)
    assert close(got[0], want[0]) and close(got[1], want[1]), (got, want)


def test_one_call_without_a_price_makes_its_side_unknown_not_smaller(db: Database) -> None:
    insert(db, [record(NOW - 100, "shadow", "anthropic", 0.01, 100),
                record(NOW - 10 * 3600, "steward", "openai", None, 100),
                record(NOW - 50, "client", "anthropic", 0.2, 100)])  # fmt: skip
    client, extraction = db.read(lambda c: spend.window(c, NOW))
    assert extraction.usd is None and extraction.tokens > 0
    assert client.usd == pytest.approx(0.2)


def test_rows_stored_before_the_hourly_sums_existed_are_counted(tmp_path: Path) -> None:
    """An upgrade: the migration sums the rows already there, the trigger the later ones."""
    older = Schema("project", tuple(m for m in PROJECT.migrations if m.name != "0008_spend_hours"))
    records = rows_around_the_window(seed=9)
    before = Database(tmp_path / "ember.db", older)
    insert(before, records[:300])
    before.close()
    after = Database(tmp_path / "ember.db", PROJECT)
    try:
        insert(after, records[300:])
        got = after.read(lambda c: spend.window(c, NOW))
    finally:
        after.close()
    want = by_hand(records)
    assert close(got[0], want[0]) and close(got[1], want[1]), (got, want)


def test_a_recovered_database_sums_each_row_once(tmp_path: Path) -> None:
    """``ember doctor --recover`` copies the rows and lets the trigger sum them again: the
    hourly sums themselves are not copied (that counted every hour twice)."""
    from ember.store.recover import recover

    records = rows_around_the_window(seed=5)
    db = Database(tmp_path / "ember.db", PROJECT)
    insert(db, records)
    db.close()
    report = recover(tmp_path / "ember.db", PROJECT)
    assert report.tables["exchanges"].copied == len(records)
    again = Database(tmp_path / "ember.db", PROJECT)
    try:
        got = again.read(lambda c: spend.window(c, NOW))
    finally:
        again.close()
    want = by_hand(records)
    assert close(got[0], want[0]) and close(got[1], want[1]), (got, want)
