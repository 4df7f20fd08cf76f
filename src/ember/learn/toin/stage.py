"""The TOIN stage: watches tool outputs and re-fetches go by; never changes a request.

Observation-only is the contract, not a default: a hook that let learned state shape a
request would make the same input produce different bytes from one run to the next (a missed
prompt cache, a bug nobody can reproduce). So this stage only reads ``Exchange.body`` and the
answer, never edits ``Exchange.doc``, and what it learns leaves the process only through
``ember toin publish``, run at a deploy boundary.

What it sees, per session:
- a request's new tool results (the last user turn's): each becomes one observation of its
  structure in its slice (``keys``), once, even if the client resends the request. The call a
  result answers (its tool name is part of the structure) is read from the request's own
  history, which holds the assistant turn that made it. Not from the answer alone: the proxy
  runs ``on_response`` in the background after the client has its answer, so a client quick
  to send the result gets it observed first; a result taken then for one without its call
  hashes differently, and one output shape split into two patterns (48 + 12 of 60
  observations, each under ``publish``'s 50). The answer's calls are kept only for a request
  whose history does not hold them (a Responses continuation by ``previous_response_id``);
- each tool call, once, by call id, from whichever of the answer and the next request shows
  it first: a call whose digest this session already made is a **re-fetch**, counted against
  the structure of the output that first call got (decided once per call id, so a call both
  views show is never counted twice, and a call is never its own re-fetch).

Cheap and fail-open: observations accumulate in memory and are merged into ``stats.db`` by
its writer every ``FLUSH_EVERY`` observations, every ``FLUSH_SECONDS`` and at shutdown (a
``kill -9`` loses at most that much); any error here is logged and the request goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ember.bounded import Bounded
from ember.errors import StorageUnavailable
from ember.exchange import Exchange, Outcome, Services, Stage
from ember.learn.toin.keys import PatternKey, auth_mode, family
from ember.learn.toin.patterns import Pattern
from ember.learn.toin.privacy import call_signature, query_patterns, structure_of
from ember.learn.toin.store import instance_hash, merge_patterns
from ember.protocols.calls import tool_calls
from ember.store.driver import Connection
from ember.store.registry import Storage

log = logging.getLogger(__name__)

FLUSH_EVERY = 64
FLUSH_SECONDS = 5.0
#: Sessions, calls per session and call digests per session remembered (oldest go first).
MAX_SESSIONS = 512
MAX_CALLS = 256
MAX_DIGESTS = 2048


@dataclass(frozen=True)
class _Call:
    tool: str | None
    digest: str
    queries: tuple[str, ...]


#: The integers orjson (the request path's parser) reads as integers; beyond, as floats.
_INT_RANGE = range(-(2**63), 2**64)


def _as_parsed(value: Any) -> Any:
    """``value`` with every integer outside ``_INT_RANGE`` a float, as the request path
    reads it (``jsonedit.parse``); an answer's arguments and a Chat or Responses arguments
    string go through ``json``, which keeps such integers whole."""
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT_RANGE:
        return float(value)
    if isinstance(value, dict):
        return {k: _as_parsed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_parsed(v) for v in value]
    return value


def _arguments(value: Any) -> Any:
    """A call's arguments as one value whichever view read them, so its digest is the same.

    The answer's block holds them parsed (or as the text, when it does not parse; ``{}`` for
    none); ``protocols.calls`` reads the request's history into ``{"_raw": text}`` for a text
    that is no JSON object and ``{}`` for none, and the request body was parsed by orjson.
    Without this a call with free-text arguments (Codex's ``apply_patch``) or a 20-digit
    number would digest one way from the answer and another from the request, and its
    re-fetches would go uncounted."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("_raw"), str):
        value = value["_raw"]
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            return value
    return {} if value is None else _as_parsed(value)


def _call(tool: str | None, arguments: Any) -> _Call:
    args = _arguments(arguments)
    return _Call(tool, call_signature(tool, args), tuple(query_patterns(args)))


@dataclass
class _Session:
    #: call id -> the call an answer made, for a request whose history does not hold it
    calls: Bounded[str, _Call] = field(default_factory=lambda: Bounded(MAX_CALLS))
    #: call digest -> the key and kind of the output the first such call got
    digests: Bounded[str, tuple[PatternKey, str]] = field(
        default_factory=lambda: Bounded(MAX_DIGESTS)
    )
    #: result ids already observed (a resent request observes nothing new)
    observed: Bounded[str, None] = field(default_factory=lambda: Bounded(MAX_CALLS))
    #: call ids already checked for a re-fetch (by the answer or by the request, first wins)
    checked: Bounded[str, None] = field(default_factory=lambda: Bounded(MAX_CALLS))


class ToinStage(Stage):
    name = "toin"

    def __init__(
        self,
        storage: Storage,
        clock: Callable[[], float] = time.time,
        flush_every: int = FLUSH_EVERY,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self.storage = storage
        self.clock = clock
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self._sessions: Bounded[str, _Session] = Bounded(MAX_SESSIONS)
        self._pending: dict[PatternKey, Pattern] = {}
        self._count = 0
        self._ticker: asyncio.Task[None] | None = None
        self._writes: set[asyncio.Future[Any]] = set()

    async def start(self, services: Services) -> None:
        self._ticker = asyncio.create_task(self._tick(), name="toin-flush")

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.flush_seconds)
            self.flush()

    def _session(self, session_id: str) -> _Session:
        s = self._sessions.get(session_id) or _Session()
        self._sessions.put(session_id, s)
        return s

    def _pattern(self, key: PatternKey, kind: str) -> Pattern:
        p = self._pending.get(key)
        if p is None:
            p = self._pending[key] = Pattern(key, kind)
        return p

    async def on_request(self, ex: Exchange) -> None:
        try:
            self.observe_request(ex)
        except StorageUnavailable:  # the database said so itself, once
            pass
        except Exception:  # fail open: learning never costs a request
            log.exception("TOIN could not observe a request; it went on untouched")

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        try:
            self.observe_answer(ex, outcome)
        except StorageUnavailable:  # the database said so itself, once
            pass
        except Exception:
            log.exception("TOIN could not observe an answer")

    def observe_request(self, ex: Exchange) -> None:
        results = ex.adapter.tool_results(ex.body)
        if not results:
            return
        session = self._session(ex.session_id)
        slice_ = (auth_mode(ex.headers), family(ex.model))
        now = self.clock()
        history: dict[str, _Call] | None = None
        for r in results:
            if r.tool_use_id is not None and not session.observed.first_sight(r.tool_use_id, None):
                continue
            call = None
            if r.tool_use_id is not None:
                if history is None:  # read once, and only for a request with a new result
                    found = tool_calls(ex.adapter, ex.body)
                    history = {i: _call(c.name, c.arguments) for i, c in found.items()}
                answered = session.calls.pop(r.tool_use_id, None)
                call = history.get(r.tool_use_id, answered)
            structure = structure_of(call.tool if call else None, r.content)
            key = PatternKey(*slice_, structure.hash)
            pattern = self._pattern(key, structure.kind)
            size = len(r.content.encode("utf-8", errors="surrogatepass"))
            pattern.observe(size, r.is_error, structure.fields, now)
            self._count += 1
            if call is None or r.tool_use_id is None:
                continue
            pattern.queries.update(call.queries)
            first = session.digests.get(call.digest)
            if first is None:
                session.digests.put(call.digest, (key, structure.kind))
            elif session.checked.first_sight(r.tool_use_id, None):  # the answer came later
                self._pattern(*first).refetches += 1
                self._count += 1
        if self._count >= self.flush_every:
            self.flush()

    def observe_answer(self, ex: Exchange, outcome: Outcome) -> None:
        msg = outcome.message
        calls = msg.tool_calls if msg is not None else []
        if not calls:
            return
        session = self._session(ex.session_id)
        for block in calls:
            if block.id and block.id in session.observed:
                continue  # its result was observed already, from the request's history
            call = _call(block.name, block.input)
            if not block.id or session.checked.first_sight(block.id, None):
                first = session.digests.get(call.digest)
                if first is not None:  # the same call again: a re-fetch of that output
                    self._pattern(*first).refetches += 1
                    self._count += 1
            if block.id:
                session.calls.put(block.id, call)

    def flush(self) -> asyncio.Future[Any] | None:
        """Hand what was observed to ``stats.db``'s writer (never waits for it)."""
        if not self._pending:
            return None
        pending, self._pending, self._count = list(self._pending.values()), {}, 0

        def job(conn: Connection) -> int:
            me = instance_hash(conn)
            return merge_patterns(conn, [replace(p, instances=(me,)) for p in pending])

        done = asyncio.wrap_future(self.storage.stats().submit(job, label="toin"))
        self._writes.add(done)
        done.add_done_callback(self._written)
        return done

    def _written(self, done: asyncio.Future[Any]) -> None:
        self._writes.discard(done)
        if not done.cancelled() and done.exception() is not None:
            log.warning("TOIN observations were not stored: %s", done.exception())

    async def settle(self) -> None:
        self.flush()
        for done in list(self._writes):
            with contextlib.suppress(Exception):
                await done

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        await self.settle()
