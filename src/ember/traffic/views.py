"""Traffic learning on the dashboard (``Feature.views``): each lesson it has seen in the
project, how often, and whether it became a memory (at its second sighting)."""

from __future__ import annotations

import json
from typing import Any

from ember.views import Query, Route, ViewContext

_SELECT = (
    "SELECT key, category, content, count, evidence, saved, first_seen, last_seen "
    "FROM traffic_sightings ORDER BY last_seen DESC LIMIT ?"
)


def lessons(ctx: ViewContext, q: Query) -> list[dict[str, Any]]:
    limit = q.number("limit", 500, 1, 10_000)

    def read(conn: Any) -> list[dict[str, Any]]:
        return [
            {
                "lesson": r["content"],
                "category": r["category"],
                "seen": r["count"],
                "state": "saved as a memory" if r["saved"] else "seen once: saved at the next",
                "evidence": len(json.loads(r["evidence"] or "[]")),
                "first_seen": r["first_seen"],
                "last_seen": r["last_seen"],
            }
            for r in conn.execute(_SELECT, (limit,))
        ]

    return ctx.project_db(q.needs_project()).read(read)


def views() -> tuple[Route, ...]:
    return (Route("GET", "lessons", lessons),)
