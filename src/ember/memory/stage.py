"""The memory stage: cross-session memory in the proxy (``EMBER_MEMORY_MODE``).

``auto_tail`` (default): on a new user ask, retrieve from the project's store and append the
READ-ONLY block as a new content block after the client's last block of that ask; on every
later request of the session, re-apply each earlier block at its message (the ledger), so the
prefix the provider cached never changes. System, tools and the rest of the history are never
touched, and the client's own blocks — including Claude Code's ``cache_control`` on its last
text block — keep their bytes.

``tool``: no injection; the model is offered the four memory tools, executed by ember and
invisible to the client. ``off``: nothing.

Fail closed for data: a request whose project is unresolved gets nothing (unless
``EMBER_UNRESOLVED_PROJECT=global``). Fail open for the request: while the embedder is still
loading, or when the store fails, the request goes on without memory, and the proxy never
waits for the model at start-up. A project whose database was switched off (corrupt,
read-only, full: see ``ember.store.health``) gets no memory until it is fixed — not even a
replayed block, since the ledger that would say what to replay cannot be trusted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from ember.config import Settings
from ember.embedder import Embedder, EmbedderLoader, preload_from
from ember.errors import EmberError, StorageUnavailable
from ember.exchange import Exchange, Services, Stage
from ember.memory.core import HierarchicalMemory
from ember.memory.echo import not_echoed
from ember.memory.gate import AskGate
from ember.memory.ledger import InjectionLedger, LedgerEntry, message_digest
from ember.memory.metrics import MemoryMetrics
from ember.memory.models import MemoryFilter, MemoryHit
from ember.memory.retrieval.injection_budget import InjectionBudget
from ember.memory.retrieval.query import MemoryQuery
from ember.memory.router import MemoryRouter
from ember.memory.settings import MemorySettings
from ember.memory.tools import MEMORY_TOOL_SPECS, MemoryTools
from ember.protocols import edits
from ember.protocols.base import ProtocolAdapter
from ember.protocols.tooling import TOOLING
from ember.protocols.transcript_items import item_digest, transcript_items
from ember.store.registry import Storage
from ember.threads import is_compaction

log = logging.getLogger(__name__)


#: Context that clients put inside the user's message (Claude Code's reminders with CLAUDE.md
#: and todo lists, Codex's environment, Gemini CLI's session context with the directory tree):
#: not what the user asked, and often long enough to push the ask out of the encoder's window.
_CLIENT_CONTEXT = re.compile(
    r"<(system-reminder|environment_context|session_context)>.*?</\1>", re.DOTALL | re.IGNORECASE
)
#: aider on Anthropic appends its edit-format rules to the ask itself (3 KB after a one-line
#: ask: no memory was found for it).
_CLIENT_RULES = re.compile(r"\s*# \*SEARCH/REPLACE block\* Rules:.*\Z", re.DOTALL)


def ask_text(text: str) -> str:
    """The user's own words in a user message, without the client's context blocks."""
    return _CLIENT_RULES.sub("", _CLIENT_CONTEXT.sub(" ", text)).strip()


class MemoryStage(Stage):
    name = "memory"

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        router: MemoryRouter | None = None,
        ledger: InjectionLedger | None = None,
    ) -> None:
        self.settings = settings
        self.options = options = settings.section(MemorySettings)
        self.mode = options.memory_mode
        if self.mode == "tool":
            self.http_only = "ember runs memory tools over HTTP only (memory_mode = tool)"
        self.storage = storage
        self._loader: EmbedderLoader | None = None
        self.router = router or MemoryRouter(settings, self._embedder_now, storage=storage)
        self.ledger = ledger or InjectionLedger(storage)
        self.budget = InjectionBudget(
            options.memory_budget_tokens, options.memory_max_items, options.memory_min_score
        )
        # The router's share: searches and the fact writers draw on one budget.
        self.gate = AskGate(
            options.memory_concurrent_asks or os.cpu_count() or 1, self.router.share
        )
        self._catching_up: set[asyncio.Task[None]] = set()
        self.metrics: MemoryMetrics | None = None

    async def start(self, services: Services) -> None:
        self.metrics = MemoryMetrics(services.metrics, self.gate)

    def _start_loading(self) -> EmbedderLoader:
        """The embedder's load, started (in a thread) on first use."""
        if self._loader is None:
            self._loader = preload_from(self.settings)
        return self._loader

    def _embedder_now(self) -> Embedder:
        """The embedder if it is loaded; starts loading it (in a thread) on first use.

        Loaded on demand rather than at start-up: the proxy starts in a fraction of a second
        and idles small, and a project without memories never pays for the model.
        """
        return self._start_loading().get(timeout=0)

    async def _ready_for_search(self, store: HierarchicalMemory) -> None:
        """Before the model's ``memory_search`` in tool mode: a store with memories waits for a
        loading model as an ask does in ``auto_tail`` (``_wait_for_embedder``), so the
        session's first search ranks by meaning too; past the wait it ranks by keywords."""
        if store.embedder_ready or await asyncio.to_thread(store.is_empty):
            return
        await self._wait_for_embedder("this search ranks by keywords only")

    async def _wait_for_embedder(self, then: str = "this ask gets no memory") -> bool:
        """Give a loading model a moment (once per process, only for a project that has
        memories to find); False when it is still not there — this ask goes without."""
        loader = self._start_loading()
        try:
            await asyncio.to_thread(loader.get, self.options.memory_embedder_wait)
        except EmberError as exc:
            log.info("memory: embedder not ready (%s); %s", exc, then)
            return False
        return True

    async def on_request(self, ex: Exchange) -> None:
        if self.mode == "off" or not ex.is_main_thread:
            return  # title requests, compaction summaries' side calls and sub-agents: untouched
        db = self.router.path_for(ex.project)
        if db is None:
            return  # unresolved project: fail closed
        database = self.storage.database(db)
        if not database.health.ok and not database.durable_hold:
            return  # the project's file was switched off: no memory until it is fixed
        if self.mode == "tool":
            store = self.router.open_store(ex.project) or await asyncio.to_thread(
                self.router.for_project, ex.project
            )
            if store is not None:
                self._start_loading()  # while the model thinks, before its first search
                TOOLING[ex.adapter.name].add_definitions(ex.doc, MEMORY_TOOL_SPECS)
                ex.owned_tools = MemoryTools(store, ex.session_id, self._ready_for_search)
            return
        await self._auto_tail(ex, db)

    async def _auto_tail(self, ex: Exchange, db: Path) -> None:
        adapter, body = ex.adapter, ex.doc.value
        try:
            entries = await self.ledger.entries(db, ex.session_id)
        except StorageUnavailable:  # a store that holds its writes durably, down (on_request)
            entries = self.ledger.cached(db, ex.session_id) or []
        count = adapter.turn_end(body)  # a client's note after the ask leaves the ask new
        ask = adapter.latest_user_index(body)
        # Digests from the client's text, before any edit of this request.
        digests = {i: message_digest(i, adapter.user_text(body, i)) for i in _indices(entries, ask)}
        new_ask = ask is not None and ask == count - 1
        if new_ask and any(
            e.message_index == ask and e.message_digest == digests[ask] for e in entries
        ):
            new_ask = False  # a retry of an ask already answered: replay, never re-retrieve
        # The entries whose message is still in this history: their blocks are replayed, and
        # only their facts count as already in the conversation. After a compaction the
        # history no longer holds them, and their facts may be injected again.
        live = [e for e in entries if digests.get(e.message_index) == e.message_digest]
        for e in live:
            if e.block:
                edits.append_user_tail(adapter, ex.doc, e.message_index, e.block)
        if not new_ask or ask is None or is_compaction(adapter.user_text(body, ask)):
            return  # a compaction's instructions are the client's, not an ask of the user's
        # From here on a failure costs only this ask's new block: the replays above stay, so
        # the session's cached prefix keeps its bytes.
        entry: LedgerEntry | None = None
        try:
            try:
                entry = await self._retrieve(ex, adapter, ask, digests[ask], injected(live))
            except EmberError as exc:
                if not _store_down(exc) or not self.storage.database(db).durable_hold:
                    raise
                # the store is down and holds its writes: the ask goes without memories,
                # and the ledger says so, so the session's later requests replay it the same
                entry = LedgerEntry(ask, digests[ask], "")
            if entry is not None:
                await self.ledger.record(db, ex.session_id, entry)
        except StorageUnavailable:
            entry = None  # the project's database said so itself, once: no warning per ask
        except EmberError as exc:
            level = logging.DEBUG if _store_down(exc) else logging.WARNING  # said by the store
            log.log(
                level, "memory: no injection for this ask of session %s: %s", ex.session_id, exc
            )
            entry = None
        if self.metrics is not None:
            self.metrics.ask(entry)
        if entry is None:
            return
        if entry.block:
            edits.append_user_tail(adapter, ex.doc, ask, entry.block)
            log.info(  # ids only: never a memory's text
                "memory: injected ids %s into session %s",
                ",".join(entry.memory_ids) or "-",
                ex.session_id,
            )
        ex.state[self.name] = entry
        ex.notes[self.name] = {
            "injected": len(entry.memory_ids),
            "bytes": len(entry.block.encode()),
            "busy": entry.busy,
        }

    async def _retrieve(
        self, ex: Exchange, adapter: ProtocolAdapter, ask: int, digest: str, already: set[str]
    ) -> LedgerEntry | None:
        """The entry for a new ask; None when retrieval could not run (nothing recorded, so
        a later retry may still get memories). Facts ``already`` injected into messages
        this history still holds are left out: a second copy only costs tokens."""
        body = ex.doc.value
        tools, turns = adapter.recent_context(body, ask)
        query = MemoryQuery.build(ask_text(adapter.user_text(body, ask)), tools, turns)
        if query.is_empty:
            return LedgerEntry(ask, digest, "")
        store = self.router.open_store(ex.project) or await asyncio.to_thread(
            self.router.for_project, ex.project
        )
        if store is None:
            return None
        if store.known_nonempty() and store.embedder_ready:
            empty, ready = False, True  # the steady state: no thread hop to learn it
        else:
            empty, ready = await asyncio.to_thread(lambda: (store.is_empty(), store.embedder_ready))
        if empty:
            return LedgerEntry(ask, digest, "")  # nothing to find: no model needed
        if not ready and not await self._wait_for_embedder():
            return None
        if not self.gate.enter():
            # Memory is at capacity: this ask goes on without memories, and the ledger says
            # so (nothing injected here), so the session's later requests replay it the same.
            return LedgerEntry(ask, digest, "", busy=True)
        hits = await self._search(store, query, ex.session_id, len(already))
        if hits is None:
            return LedgerEntry(ask, digest, "", busy=True)
        if store.deferred and not self._catching_up:
            task = asyncio.create_task(self._catch_up(store))
            self._catching_up.add(task)
            task.add_done_callback(self._catching_up.discard)
        fresh = not_echoed(
            not_yet_injected(hits, already), ex.session_id, lambda: said(adapter, body)
        )
        chosen = self.budget.select(fresh)
        return LedgerEntry(ask, digest, chosen.text, fact_keys(chosen.hits))

    async def _search(
        self, store: HierarchicalMemory, query: MemoryQuery, session: str, already: int
    ) -> list[MemoryHit] | None:
        """The hits, or None when the search outlasted ``memory_search_wait`` (the ask goes
        on without them; the search runs to its end and gives its slot back then). The
        caller holds a slot (``gate.enter``)."""
        started = time.monotonic()
        search = asyncio.ensure_future(
            asyncio.to_thread(
                store.search,
                query,
                top_k=search_depth(self.budget.max_items, already),
                memory_filter=MemoryFilter(session_id=session),
            )
        )

        def ended(done: asyncio.Future[list[MemoryHit]]) -> None:
            self.gate.leave(time.monotonic() - started)
            if not done.cancelled():
                done.exception()  # an error after the ask gave up is not left unread

        search.add_done_callback(ended)
        wait = self.options.memory_search_wait
        try:
            return await asyncio.wait_for(asyncio.shield(search), wait)
        except TimeoutError:
            self.gate.gave_up(wait)
            return None

    async def _catch_up(self, store: HierarchicalMemory) -> None:
        """Vectors for facts a flood left without (``add_many(background=True)``), after the
        ask that found the store behind, on a worker thread: never in an ask's way."""
        try:
            await asyncio.to_thread(store.catch_up)
        except EmberError as exc:
            log.info("memory: facts still wait for their vectors in %s: %s", store.path, exc)
        except Exception:
            log.warning("memory: catching up on vectors failed in %s", store.path, exc_info=True)

    async def close(self) -> None:
        # A catch-up under way finishes first (32 texts at most): the stores close after it.
        await asyncio.gather(*self._catching_up, return_exceptions=True)
        await asyncio.to_thread(self.router.close)
        self.ledger.close()


def said(adapter: ProtocolAdapter, body: object) -> set[str]:
    """The digests of what a conversation's messages say (``memory.echo``)."""
    return {item_digest(i) for i in transcript_items(adapter, body)}


def search_depth(max_items: int, already: int) -> int:
    """How many hits to ask for: the block's items plus one spare per fact already injected
    (``not_yet_injected`` drops at most that many), at most three times the items.

    The budget keeps a ranked run and never skips ahead, so hits past that never reach the
    block; asking for them only made each index search three times as deep (30 hits instead of
    10: 84.6 against 50.3 ms p50 at 100k memories on a loaded machine). A fresh ask thus
    injects what ``ember memory search --top-k 10`` shows, floor applied: the search that
    ``bench/memory_quality.py`` measures, not a deeper one it never evaluated.
    """
    return min(max_items + already, 3 * max_items)


def fact_keys(hits: Sequence[MemoryHit]) -> tuple[str, ...]:
    """The ids a ledger entry keeps for its block: each memory's and, for a user-wide copy,
    the fact it was promoted from — the same fact under two ids."""
    keys = dict.fromkeys(
        k for h in hits for k in (h.memory.id, h.memory.promoted_from) if k is not None
    )
    return tuple(keys)


def injected(entries: Sequence[LedgerEntry]) -> set[str]:
    return {k for e in entries for k in e.memory_ids}


def not_yet_injected(hits: Sequence[MemoryHit], already: set[str]) -> list[MemoryHit]:
    return [h for h in hits if h.memory.id not in already and h.memory.promoted_from not in already]


def _indices(entries: list[LedgerEntry], ask: int | None) -> set[int]:
    wanted = {e.message_index for e in entries}
    if ask is not None:
        wanted.add(ask)
    return wanted


def _store_down(exc: BaseException) -> bool:
    """``exc`` is the store being off (``StorageUnavailable``, maybe wrapped by the memory
    store): the store said so itself, once."""
    return isinstance(exc, StorageUnavailable) or isinstance(exc.__cause__, StorageUnavailable)
