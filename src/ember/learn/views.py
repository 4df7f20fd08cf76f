"""What ``ember learn`` and TOIN learned, on the dashboard (``Feature.views``).

- ``blocks``: the learn blocks in the project's agent files (``CLAUDE.local.md``, ``CLAUDE.md``,
  ``AGENTS.md``, ``GEMINI.md``), section by section. The folder is the project's own identity
  as its requests named it (read from its database, never taken from the page), and only
  when it is a local folder: a project named by an id has no files to read.
- ``toin``: the tool-output structures TOIN observed (``stats.db``), the most seen first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember.errors import EmberError
from ember.learn.toin.store import load_patterns
from ember.learn.writeback import AGENT_FILES, CLAUDE_SHARED, read_learned
from ember.store.registry import stats_db_path
from ember.store.schema import STATS
from ember.views import Query, Route, ViewContext


def blocks(ctx: ViewContext, q: Query) -> dict[str, Any]:
    db = ctx.project_db(q.needs_project())
    row = db.read(
        lambda c: c.execute(
            "SELECT project FROM exchanges WHERE project IS NOT NULL ORDER BY id DESC LIMIT 1"
        ).fetchone()
    )
    folder = Path(row[0]) if row is not None and row[0] else None
    if folder is None or not folder.is_absolute() or not folder.is_dir():
        return {"folder": None, "files": []}
    files: list[dict[str, Any]] = []
    for name in sorted({*AGENT_FILES.values(), CLAUDE_SHARED}):
        try:
            sections = read_learned(folder / name)
        except EmberError as exc:  # broken markers: said, not guessed around
            files.append({"file": name, "problem": str(exc), "sections": []})
            continue
        if sections:
            found = [{"section": k, "text": v} for k, v in sections.items()]
            files.append({"file": name, "sections": found})
    return {"folder": str(folder), "files": files}


def toin(ctx: ViewContext, q: Query) -> list[dict[str, Any]]:
    path = stats_db_path(ctx.home)
    if not ctx.storage.holds(path, STATS):
        return []  # nothing observed yet (no file, or no schema: a read makes neither)
    limit = q.number("limit", 200, 1, 10_000)
    patterns = ctx.storage.database(path, STATS).read(load_patterns)
    patterns.sort(key=lambda p: p.observations, reverse=True)
    return [
        {
            "kind": p.kind,
            "structure": p.key.structure_hash[:12],
            "model_family": p.key.model_family,
            "observations": p.observations,
            "refetch_rate": round(p.refetch_rate, 3),
            "error_rate": round(p.error_rate, 3),
            "mean_bytes": round(p.size.mean),
            "fields": [f for f, _ in p.fields.most_common(6)],
            "last_seen": p.last_seen,
        }
        for p in patterns[:limit]
    ]


def views() -> tuple[Route, ...]:
    return (Route("GET", "blocks", blocks), Route("GET", "toin", toin))
