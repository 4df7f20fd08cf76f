"""Reservations: what requests in flight may still cost, kept in the project's store (SQL).

Proxies that each read the shared spend and admit requests against it all admit the same
room: a burst of three passed a $0.05 limit three times over. So a request is admitted in one
write transaction that reads the spend and every live reservation, decides, and writes its
own reservation: the store's write lock (SQLite's
``BEGIN IMMEDIATE``; on PostgreSQL the schema's writer lock, ``store.pg.serial``) makes those
transactions one at a time across every proxy, so no two admit on the same dollars.

A reservation stops counting the moment its request's accounting row is written (same
``session_id`` and ``ts``, the exchange's start): the row and the reservation are never both
counted nor both missed, and no second write per request settles it. A request that never gets
a row (its proxy was killed, its database was off) holds its room until ``expires_at``, which
its live proxy keeps pushing forward while the request runs (``extend``).

Parameters are ``?`` marks: the statements run on either backend (``store.pg.connection``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ember.budget import policy
from ember.budget.spend import HOURS, OTHERS
from ember.store.driver import Connection
from ember.store.sql import one_writer

#: A reservation whose request already has its accounting row (correlated on ``r``).
_ROW_WRITTEN = (
    "EXISTS (SELECT 1 FROM exchanges e WHERE e.session_id = r.session_id AND e.ts = r.ts)"
)
#: parameters: the day's start, now, the month's start (seconds)
_LIVE = (
    "SELECT COALESCE(SUM(CASE WHEN r.ts >= ? THEN r.usd END), 0), COALESCE(SUM(r.usd), 0), "
    "COUNT(*) FROM budget_reservations r "
    f"WHERE r.expires_at > ? AND r.ts >= ? AND NOT {_ROW_WRITTEN}"
)
#: The hourly sums, the other spend (``budget.spend``) and the live reservations, one row.
_STANDING = f"SELECT * FROM ({HOURS}) AS h, ({OTHERS}) AS o, ({_LIVE}) AS l"
#: Updates in one statement at most (SQLite's parameter limit is far above).
_CHUNK = 200


@dataclass(frozen=True)
class Reservation:
    """What one request holds: ``ts`` and ``session_id`` are its accounting row's."""

    id: str
    session_id: str
    ts: float
    usd: float
    expires_at: float


@dataclass(frozen=True)
class Admission:
    """What the check saw (before this request's own reservation) and whether it passed."""

    spend: policy.Spend
    admitted: bool


def standing(conn: Connection, now: float) -> policy.Spend:
    """The project's spend and what its requests in flight hold, in one statement (on
    PostgreSQL each statement is a round trip, and this one runs under the write lock)."""
    day, month = policy.day_start(now), policy.month_start(now)
    hours = (int(day // 3600), int(month // 3600))
    row = conn.execute(_STANDING, (*hours, day, month, day, now, month)).fetchone()
    return policy.Spend(
        float(row[0] + row[2]), float(row[1] + row[3]), float(row[4]), float(row[5]), int(row[6])
    )


def reserve(
    conn: Connection,
    ask: Reservation,
    limits: policy.Limits,
    now: float,
    settled: Mapping[str, float] | None = None,
) -> Admission:
    """Admit ``ask`` unless a limit is reached by what was spent and what is held, and hold
    its room; a write job (it must run inside the store's write transaction). ``settled``:
    reservations of this proxy's requests answered since, at what they cost (``settle``)."""
    one_writer(conn)  # PostgreSQL: the batch took it already; taken before any read
    settle(conn, settled or {})
    found = standing(conn, now)
    over = any(s.state == "over" for s in policy.standings(limits, found, 1.0, now))
    if not over:
        conn.execute(
            "INSERT INTO budget_reservations (id, session_id, ts, usd, expires_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (ask.id, ask.session_id, ask.ts, ask.usd, ask.expires_at),
        )
    return Admission(found, not over)


def settle(conn: Connection, costs: Mapping[str, float]) -> None:
    """Reservations of requests answered, set to what each answer cost: they count that until
    its accounting row is written. An agent sends its next turn as soon as it has the
    answer, often before the row is in; held at its estimate (up to a 4k-token answer), the
    last request made the next one look past the limit."""
    for rid, usd in costs.items():
        conn.execute("UPDATE budget_reservations SET usd = ? WHERE id = ?", (usd, rid))


def extend(conn: Connection, ids: Sequence[str], until: float) -> None:
    """Keep the reservations of requests still running alive until ``until``."""
    for i in range(0, len(ids), _CHUNK):
        part = list(ids[i : i + _CHUNK])
        marks = ", ".join("?" * len(part))
        conn.execute(
            f"UPDATE budget_reservations SET expires_at = ? WHERE id IN ({marks})",
            (until, *part),
        )


def release(conn: Connection, ids: Sequence[str]) -> None:
    """Drop reservations whose requests will get no accounting row (accounting is off)."""
    for i in range(0, len(ids), _CHUNK):
        part = list(ids[i : i + _CHUNK])
        marks = ", ".join("?" * len(part))
        conn.execute(f"DELETE FROM budget_reservations WHERE id IN ({marks})", part)


def sweep(conn: Connection, now: float) -> int:
    """Delete the reservations that no longer count (their row is written, or they expired);
    how many. They are left out of every sum anyway: this only keeps the table small."""
    cur = conn.execute(
        "DELETE FROM budget_reservations AS r WHERE r.expires_at <= ? OR " + _ROW_WRITTEN,
        (now,),
    )
    return max(cur.rowcount, 0)
