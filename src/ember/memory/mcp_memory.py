"""What the MCP server's tools and resources do to the served project's memory (blocking).

The server is a session of its own, as the proxy sees sessions: its searches see what a new
session of the project is given (project-wide facts, never another session's scratch facts:
the filter is the proxy's, keyed by this server's own session id), and what it saves is
project-wide, so the proxy injects it into the next session of any agent.

``memory_search`` runs the search a new ask runs in the proxy — the same store options
(vector index, time awareness, CPU share: the store is opened by a ``MemoryRouter``, as the
proxy's stage opens it), the same depth (``memory_max_items``), then the injection floor
(``memory_min_score``) — and only then keeps ``top_k``: a hit the proxy would never inject is
never returned as if it would be.

A save carries evidence of kind ``user-stated`` only when the client said the user stated the
facts (``user_stated``), pointing at this server's session (ember saw no message it could name);
otherwise none: a model's say-so is not evidence, and evidence nobody checked would later pass
for the checked kind shadow memory writes.

Nothing is created until something is saved: a search, a list or a resource read of a project
without ember data answers empty (an agent that only looks must not leave a database behind
in every project it was opened in). The store and its file owner come from one ``Storage``
for the process, the single writer of the file here; a proxy writing the same file from its
own process is arbitrated by SQLite (WAL, busy timeout), as for the CLI next to a proxy.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from ember.cmdkit import access
from ember.config import Settings
from ember.errors import ProjectError
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryNotFound
from ember.memory.explain import explain_hit
from ember.memory.mcp_target import Served
from ember.memory.mcp_tools import ForgetArgs, ListArgs, SaveArgs, SearchArgs, UpdateArgs
from ember.memory.models import Evidence, Memory, MemoryFilter, NewMemory, iso
from ember.memory.retrieval.injection_budget import InjectionBudget
from ember.memory.router import MemoryRouter
from ember.memory.settings import MemorySettings
from ember.memory.shapes import hits_json
from ember.memory.vectors import EmbedderSource
from ember.store.accounting import totals_by_origin
from ember.store.registry import Storage
from ember.store.schema import PROJECT, STATS

#: The most memories the ``ember://memories`` resource holds (newest first).
RESOURCE_LIMIT = 1000
_TOTALS = ("requests", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


class ProjectMemory:
    """The served project's memory, opened on first need; one per server process."""

    def __init__(
        self,
        settings: Settings,
        target: Served,
        embedder: EmbedderSource,
        storage: Storage,
    ) -> None:
        self.settings, self.target, self.storage = settings, target, storage
        options = settings.section(MemorySettings)
        self.budget = InjectionBudget(
            options.memory_budget_tokens, options.memory_max_items, options.memory_min_score
        )
        #: this server as a session: what it sees, and what its user-stated evidence names
        self.session_id = f"mcp-{uuid.uuid4().hex[:12]}"
        self.filter = MemoryFilter(session_id=self.session_id)
        self._router = MemoryRouter(settings, embedder, storage=storage)
        self._store: HierarchicalMemory | None = None
        self._lock = threading.Lock()

    def _existing(self) -> HierarchicalMemory | None:
        """The store; None while the project has no ember data (nothing is created)."""
        with self._lock:
            if self._store is None and not access.stored(self.storage, self.target.path, PROJECT):
                return None
            return self._opened()

    def _created(self) -> HierarchicalMemory:
        """The store, its file created if need be (a save)."""
        with self._lock:
            return self._opened()

    def _opened(self) -> HierarchicalMemory:
        if self._store is None:
            if not self.storage.postgres:  # nothing of it is kept in the home there
                access.writable(self.settings.home, self.target.path)
            store = self._router.for_project(self.target.ref)
            if store is None:  # the router refuses what ``served`` refused: never reached
                raise ProjectError(f"no memory store for {self.target.label}")
            self._store = store
        return self._store

    def has_memories(self) -> bool:
        """Whether the project holds current memories (nothing is created to find out)."""
        store = self._existing()
        return store is not None and not store.is_empty()

    # -- tools ---------------------------------------------------------------------------------

    def search(self, args: SearchArgs) -> dict[str, Any]:
        store = self._existing()
        hits = (
            []
            if store is None
            else store.search(args.query, top_k=self.budget.max_items, memory_filter=self.filter)
        )
        floor = self.budget.min_score
        kept = [h for h in hits if h.score >= floor][: args.top_k]
        explained = [explain_hit(h, floor) if args.explain else None for h in kept]
        doc: dict[str, Any] = {"query": args.query, "hits": hits_json(kept, explained)}
        if args.explain:
            doc |= {"floor": floor, "below_floor": sum(h.score < floor for h in hits)}
        return doc

    def save(self, args: SaveArgs, client: str | None) -> dict[str, Any]:
        evidence = (
            (Evidence("user-stated", session_id=self.session_id),) if args.user_stated else ()
        )
        metadata = {"source": "mcp"} | ({"client": client} if client else {})
        items = [
            NewMemory(
                f.content,
                importance=f.importance,
                category=f.category,
                metadata=metadata,
                evidence=evidence,
            )
            for f in args.facts
        ]
        before = time.time()
        saved = self._created().add_many(items)
        # A fact already current is returned, not stored again (nor given this evidence).
        return {
            "saved": [
                {"id": m.id, "content": m.content}
                | ({"already": True} if m.created_at < before else {})
                for m in saved
            ],
            "evidence": "user-stated" if args.user_stated else None,
        }

    def update(self, args: UpdateArgs) -> dict[str, Any]:
        store, old = self._current("memory_update", args.id)
        fields: dict[str, Any] = {}
        if args.importance is not None:
            fields["importance"] = args.importance
        if args.category is not None:
            fields["category"] = args.category
        if args.content is not None and args.content != old.content:
            new = store.supersede(old.id, args.content, **fields)
            return {"replaced": old.id, "now": _brief(new)}
        new = store.update(old.id, **fields)
        return {"updated": _brief(new)}

    def forget(self, args: ForgetArgs) -> dict[str, Any]:
        store, old = self._current("memory_forget", args.id)
        return {"forgotten": store.delete(old.id)}

    def listing(self, args: ListArgs) -> dict[str, Any]:
        store = self._existing()
        found = [] if store is None else store.list(memory_filter=self.filter, limit=args.limit + 1)
        return {
            "memories": [_brief(m) for m in found[: args.limit]],
            "more": len(found) > args.limit,
        }

    def _current(self, tool: str, memory_id: str) -> tuple[HierarchicalMemory, Memory]:
        """The store and the current memory ``memory_id`` this session may change, else
        ``MemoryNotFound`` saying so and where the ids are."""
        store = self._existing()
        found = None if store is None else store.get(memory_id)
        if store is None or found is None or not self.filter.admits(found):
            raise MemoryNotFound(
                f"{tool}: no memory with id {memory_id!r} in this project: memory_search or "
                "memory_list show the ids"
            )
        if not found.is_current:
            raise MemoryNotFound(
                f"{tool}: memory {memory_id!r} was replaced by {found.superseded_by!r}: use "
                "that id (`ember memory delete ID` removes an old version for good)"
            )
        return store, found

    # -- resources -----------------------------------------------------------------------------

    def memories(self) -> dict[str, Any]:
        """``ember://memories``: the project's current memories as ``ember memory list --json``
        prints each, newest first, at most ``RESOURCE_LIMIT``."""
        store = self._existing()
        found = (
            [] if store is None else store.list(memory_filter=self.filter, limit=RESOURCE_LIMIT + 1)
        )
        return {
            "project": self.target.label,
            "memories": [m.to_json() for m in found[:RESOURCE_LIMIT]],
            "more": len(found) > RESOURCE_LIMIT,
        }

    def spend(self) -> dict[str, Any]:
        """``ember://spend``: requests, tokens and cost accounted for the project, in all and
        by origin (the clients' own calls, and ember's: shadow memory, the steward...)."""
        path = self.target.spend_path
        rows: list[dict[str, Any]] = []
        schema = STATS if path.name == "stats.db" else PROJECT
        if access.stored(self.storage, path, schema):
            rows = self.storage.database(path, schema).read(totals_by_origin)
        return spend_summary(self.target.label, rows)

    def close(self) -> None:
        self._router.close()


def spend_summary(project: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The totals of ``rows`` (``totals_by_origin``) with the rows themselves; cost is None as
    soon as one call had no price (a partial sum would pass for the whole)."""
    total: dict[str, Any] = {k: sum(int(r[k] or 0) for r in rows) for k in _TOTALS}
    priced = all(r["cost_usd"] is not None for r in rows)
    firsts = [r["first_ts"] for r in rows if r["first_ts"] is not None]
    lasts = [r["last_ts"] for r in rows if r["last_ts"] is not None]
    by_origin = [
        {"origin": r["origin"], **{k: int(r[k] or 0) for k in _TOTALS}, "cost_usd": r["cost_usd"]}
        for r in rows
    ]
    return {
        "project": project,
        **total,
        "cost_usd": sum(r["cost_usd"] for r in rows) if priced else None,
        "unpriced_requests": sum(int(r["unpriced_requests"] or 0) for r in rows),
        "first_seen": iso(min(firsts)) if firsts else None,
        "last_seen": iso(max(lasts)) if lasts else None,
        "by_origin": by_origin,
    }


def _brief(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "importance": m.importance,
        "category": m.category,
        "created_at": iso(m.created_at),
    }
