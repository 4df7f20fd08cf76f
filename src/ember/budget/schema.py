"""The budget's tables in the project database (both dialects): the reservations of requests in
flight, and an index that keeps the spend a reservation reads beside it cheap."""

from __future__ import annotations

from ember.store.migrations import Migration

#: The rows of ember's own tool rounds (``owned_tools``): the only spend the hourly sums leave
#: out (``budget.spend``). Every reservation reads it under the store's write lock, and without
#: this index that read went through every accounting row of the month.
_OWNED_SPEND = (
    "CREATE INDEX budget_other_spend ON exchanges(ts) "
    "WHERE origin NOT IN ('client', 'shadow', 'steward');"
)

MIGRATIONS = (
    Migration(
        "budget_0001_reservations",
        f"""
        -- What each request in flight may still cost (budget.held): written with the check
        -- against the limit in one write transaction, so proxies sharing the store never
        -- admit requests on the same room. A row counts until the request's accounting row
        -- (same session_id and ts) is written, or until expires_at: a proxy that was killed
        -- leaves rows nobody renews.
        CREATE TABLE budget_reservations (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            ts REAL NOT NULL,
            usd REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        {_OWNED_SPEND}
        """,
        postgres=f"""
        CREATE TABLE budget_reservations (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            usd DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL
        );
        {_OWNED_SPEND}
        """,
    ),
)


def migrations() -> tuple[Migration, ...]:
    return MIGRATIONS
