"""Memory on the dashboard (``Feature.views``): the project's memories with their provenance,
search with the same breakdown as ``ember memory search --explain``, edit and forget, what
the proxy injected into each session, and the requests each memory went into
(``ember.memory.injected``).

Edits and deletions go through ``HierarchicalMemory`` on the process's own storage owner, the
one the proxy writes with when it serves the page: the row, its vector, its keyword entry and
its evidence change in one transaction, as from the CLI.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

from ember.embedder.factory import preload_from
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryInputError, MemoryNotFound
from ember.memory.explain import explain_hit
from ember.memory.injected import keep, memory_use, session_injections
from ember.memory.settings import MemorySettings
from ember.store.registry import Storage
from ember.store.transcript_rows import by_ids
from ember.tokens import count_tokens
from ember.views import Query, Route, ViewContext, ViewError

#: Memories one page of the list shows at most.
PAGE = 500

#: the stores the views opened, per storage owner (weakly: an owner that is gone takes its
#: stores with it, and a new owner never finds a store of a closed one)
_stores: weakref.WeakKeyDictionary[Storage, dict[Path, HierarchicalMemory]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _store(ctx: ViewContext, q: Query) -> HierarchicalMemory:
    """The project's store on the context's storage owner, opened once per process; the
    embedder is the process's own, loaded on the first search."""
    path = ctx.project_path(q.needs_project())
    with _lock:
        found = _stores.setdefault(ctx.storage, {}).get(path)
    if found is not None:
        return found
    loader = preload_from(ctx.settings)
    store = HierarchicalMemory(
        ctx.storage.database(path),
        lambda: loader.get(timeout=60),
        vector_index=ctx.settings.memory_vector_index,
        time_aware=ctx.settings.section(MemorySettings).memory_time_aware,
    )
    with _lock:
        kept = _stores.setdefault(ctx.storage, {}).setdefault(path, store)
    if kept is not store:
        store.close()
    return kept


def _row(m: Any) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "category": m.category,
        "importance": m.importance,
        "scope": m.scope.value,
        "created_at": m.created_at,
        "current": m.is_current,
    }


def memories(ctx: ViewContext, q: Query) -> dict[str, Any]:
    """Current memories newest first, a page of ``limit`` from ``offset`` (with the ``total``,
    so the page offers the next: a store past one page was cut off unsaid), or with ``q``
    the search's hits, each with why it scored what it did and whether it reaches the
    injection floor."""
    store = _store(ctx, q)
    text = q.params.get("q", "").strip()
    total = store.count()
    if not text:
        limit = q.number("limit", PAGE, 1, 5000)
        offset = q.number("offset", 0, 0, 10_000_000)
        listed = store.list(limit=limit, offset=offset)
        return {
            "memories": [_row(m) for m in listed],
            "total": total,
            "offset": offset,
            "limit": limit,
        }
    floor = ctx.settings.section(MemorySettings).memory_min_score
    hits = store.search(text, top_k=q.number("top_k", 20, 1, 200))
    found = [_row(h.memory) | {"score": h.score, "explain": explain_hit(h, floor)} for h in hits]
    return {"memories": found, "total": total}


def memory(ctx: ViewContext, q: Query) -> dict[str, Any]:
    """One memory: its fields, validity, supersession chain, and each piece of evidence with
    the transcript message it points at (when the transcript still holds it)."""
    store = _store(ctx, q)
    memory_id = q.text("id")
    m = store.get(memory_id)
    if m is None:
        raise ViewError(404, f"no memory {memory_id!r} in this project (forgotten?)")
    evidence = store.evidence(memory_id)
    ids = [e.message_id for e in evidence if e.message_id]
    db = ctx.project_db(q.needs_project())
    messages = db.read(lambda c: by_ids(c, ids)) if ids else {}
    use = db.read(lambda c: memory_use(c, memory_id))
    if use.settled and db.health.ok:  # kept, so the next look need not read them again
        db.submit(lambda c: keep(c, memory_id, use.settled), label="citations", hold=False)
    return _row(m) | {
        "valid_from": m.valid_from,
        "valid_until": m.valid_until,
        "supersedes": m.supersedes,
        "superseded_by": m.superseded_by,
        "history": [
            {"id": h.id, "content": h.content, "valid_until": h.valid_until}
            for h in store.history(memory_id)
        ],
        "evidence": [
            {
                "kind": e.kind,
                "message_id": e.message_id,
                "session_id": e.session_id,
                "text": messages[e.message_id].content if e.message_id in messages else None,
            }
            for e in evidence
        ],
        "injections": use.to_json(),
    }


def forget(ctx: ViewContext, q: Query) -> dict[str, Any]:
    deleted = _store(ctx, q).delete(q.text("id"))
    if not deleted:
        raise ViewError(404, f"no memory {q.text('id')!r} in this project")
    return {"deleted": deleted}


def edit(ctx: ViewContext, q: Query) -> dict[str, Any]:
    """A memory's content and importance corrected in place. What the user typed wrong is a
    400 saying what is wrong (an importance out of range was a 503, as if the store failed);
    a memory forgotten meanwhile is a 404."""
    content = q.body.get("content")
    importance = q.body.get("importance")
    if content is not None and (not isinstance(content, str) or not content.strip()):
        raise ViewError(400, "content must be non-empty text")
    if importance is not None and not _fraction(importance):
        raise ViewError(400, f"importance must be a number from 0 to 1, not {importance!r}")
    try:
        updated = _store(ctx, q).update(
            q.text("id"),
            content=content,
            importance=float(importance) if importance is not None else None,
        )
    except MemoryInputError as exc:  # the content refused (a bare secret, too long)
        raise ViewError(400, str(exc)) from exc
    except MemoryNotFound as exc:
        raise ViewError(404, f"{exc} (forgotten?)") from exc
    return _row(updated)


def _fraction(value: Any) -> bool:
    """A JSON number from 0 to 1 (``true`` is no number, NaN is in no range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0.0 <= value <= 1.0


def injections(ctx: ViewContext, q: Query) -> list[dict[str, Any]]:
    """What the proxy appended to each ask of a session (the ledger), with its size, which
    memories the answers after it cite (from the block as injected: a memory forgotten since
    leaves the verdict as it was, ``ember.memory.injected``), and ``forgotten``: the ids no
    longer in the project (the page links the others to their memory)."""
    session = q.text("session")

    def read(conn: Any) -> list[dict[str, Any]]:
        found = session_injections(conn, session)
        ids = sorted({i for entry in found for i in entry["memory_ids"]})
        held = set(present(conn, ids))
        for entry in found:
            entry["bytes"] = len(entry["block"].encode())
            entry["tokens"] = count_tokens(entry["block"])
            entry["forgotten"] = [i for i in entry["memory_ids"] if i not in held]
        return found

    return ctx.project_db(q.needs_project()).read(read)


def present(conn: Any, ids: list[str]) -> list[str]:
    """Those of ``ids`` the project still holds (current or in a memory's history)."""
    out: list[str] = []
    for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit, with room
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        out += [r[0] for r in conn.execute(f"SELECT id FROM memories WHERE id IN ({marks})", chunk)]
    return out


def views() -> tuple[Route, ...]:
    return (
        Route("GET", "memories", memories),
        Route("GET", "memory", memory),
        Route("GET", "injections", injections),
        Route("POST", "forget", forget, writes=True),
        Route("POST", "edit", edit, writes=True),
    )
