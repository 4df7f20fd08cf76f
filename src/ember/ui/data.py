"""The kernel's reads for the dashboard: spend over time, sessions, requests (pure SQL over one
project's connection; ``ember.ui.home`` runs them over every project of a home).

Days are UTC days (``ts // 86400``), the same for every user of one home. One grouped query a
project gives every breakdown the page draws (by model and by origin), so a year of requests
is one scan of the ``exchanges_by_time`` index per project, not one per chart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ember.store.driver import Connection
from ember.store.sql import dialect, truncated

DAY = 86_400
#: What the page can split spend by (a project's own column, or the project itself).
BREAKDOWNS = ("origin", "model", "project")


@dataclass
class Tally:
    """Requests, tokens by kind and cost, summed; ``unpriced``: requests without a price
    (their cost is unknown, not zero: the page says so)."""

    requests: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    usd: float = 0.0
    unpriced: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.requests += row["requests"]
        self.input += row["input"] or 0
        self.cache_read += row["cache_read"] or 0
        self.cache_write += row["cache_write"] or 0
        self.output += row["output"] or 0
        self.usd += row["usd"] or 0.0
        self.unpriced += row["unpriced"] or 0

    @property
    def cache_read_share(self) -> float | None:
        """Cache reads over all input the provider read (fresh + cache read + cache write):
        how much of the prompt came from the cache; None with no input at all."""
        total = self.input + self.cache_read + self.cache_write
        return self.cache_read / total if total else None

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "input_tokens": self.input,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "usd": round(self.usd, 6),
            "unpriced_requests": self.unpriced,
            "cache_read_share": self.cache_read_share,
        }


#: A row's UTC day, truncated on both backends (``truncated``: a rounded one put every
#: afternoon request on the next day, out of the window the page asks for).
_DAY = truncated("ts / 86400")

_DAILY = {
    name: f"""
SELECT {day} AS day, origin, COALESCE(model, '?') AS model,
       COUNT(*) AS requests, SUM(input_tokens) AS input, SUM(cache_read_tokens) AS cache_read,
       SUM(cache_write_tokens) AS cache_write, SUM(output_tokens) AS output,
       SUM(cost_usd) AS usd, COUNT(*) - COUNT(cost_usd) AS unpriced
FROM exchanges WHERE ts >= ? GROUP BY day, origin, model
"""
    for name, day in _DAY.items()
}


_TOTAL = """
SELECT COUNT(*) AS requests, SUM(input_tokens) AS input, SUM(cache_read_tokens) AS cache_read,
       SUM(cache_write_tokens) AS cache_write, SUM(output_tokens) AS output,
       SUM(cost_usd) AS usd, COUNT(*) - COUNT(cost_usd) AS unpriced
FROM exchanges
"""


def total(conn: Connection) -> dict[str, Any]:
    """The project's whole tally: one pass without grouping (a grouped pass over a year of a
    busy project's rows took 40 ms of the page's first paint)."""
    return dict(conn.execute(_TOTAL).fetchone())


def daily(conn: Connection, since: float) -> list[dict[str, Any]]:
    """One row per (UTC day, origin, model) since ``since``."""
    return [dict(r) for r in conn.execute(_DAILY[dialect(conn)], (since,))]


@dataclass
class Spend:
    """Spend per day and key (an origin, a model or a project), and the totals."""

    first_day: int
    days: int
    by: str
    series: dict[str, list[Tally]] = field(default_factory=dict)
    total: Tally = field(default_factory=Tally)

    def add(self, project: str, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            i = row["day"] - self.first_day
            if not 0 <= i < self.days:
                continue
            key = project if self.by == "project" else str(row[self.by])
            if key not in self.series:
                self.series[key] = [Tally() for _ in range(self.days)]
            self.series[key][i].add(row)
            self.total.add(row)

    def to_json(self) -> dict[str, Any]:
        keys = sorted(self.series, key=lambda k: -sum(t.usd for t in self.series[k]))
        return {
            "by": self.by,
            "days": [(self.first_day + i) * DAY for i in range(self.days)],
            "series": [
                {
                    "key": k,
                    "usd": [round(t.usd, 6) for t in self.series[k]],
                    "tokens": [
                        t.input + t.cache_read + t.cache_write + t.output for t in self.series[k]
                    ],
                    "requests": [t.requests for t in self.series[k]],
                    "cache_read_share": [t.cache_read_share for t in self.series[k]],
                }
                for k in keys
            ],
            "total": self.total.to_json(),
        }


def session_page(conn: Connection, limit: int, offset: int = 0) -> dict[str, Any]:
    """One page of ``sessions`` and where it lies: ``total`` sessions in the project, this
    page from ``offset``. A page with no total cut a project's older sessions off unsaid."""
    (total,) = conn.execute("SELECT COUNT(*) FROM session_totals").fetchone()
    return {
        "sessions": sessions(conn, limit, offset),
        "total": int(total),
        "offset": offset,
        "limit": limit,
    }


def sessions(conn: Connection, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """The latest sessions with their client totals (``session_totals``) and what ember spent
    on its own for each (shadow, steward, owned-tool rounds), newest first, from ``offset``."""
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT * FROM session_totals ORDER BY last_seen DESC, session_id LIMIT ? OFFSET ?",
            (limit, offset),
        )
    ]
    if not rows:
        return rows
    ids = [r["session_id"] for r in rows]
    marks = ",".join("?" * len(ids))
    own: dict[str, float] = {}
    for r in conn.execute(
        f"SELECT session_id, SUM(cost_usd) AS usd FROM exchanges "
        f"WHERE origin != 'client' AND session_id IN ({marks}) GROUP BY session_id",
        ids,
    ):
        own[r["session_id"]] = r["usd"] or 0.0
    for r in rows:
        r["ember_usd"] = own.get(r["session_id"], 0.0)
    return rows


def requests(conn: Connection, session_id: str, limit: int) -> list[dict[str, Any]]:
    """A session's requests in order, each with its tokens, cost, cache read and write, and
    what ember's stages noted they did to it (``notes``: shaping's level, memories injected)."""
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT id, ts, protocol, model, status, outcome, stream, thread_kind, origin, "
            "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost_usd, "
            "usage_estimated, latency_ms, ttfb_ms, error_type, notes "
            "FROM exchanges WHERE session_id = ? ORDER BY id LIMIT ?",
            (session_id, limit),
        )
    ]
    for r in rows:
        r["notes"] = json.loads(r["notes"]) if r["notes"] else {}
    return rows


def latest(conn: Connection) -> tuple[int, str | None]:
    """The last exchange's id and the project identity it names (0, None when empty)."""
    row = conn.execute("SELECT id, project FROM exchanges ORDER BY id DESC LIMIT 1").fetchone()
    return (row["id"], row["project"]) if row is not None else (0, None)
