"""One shadow run: read what is unread, ask hot or cold, check the evidence, write it once.

The hot path forks the session's recorded last request (``protocols.forking``): the provider
reads the whole old prefix from its cache and only the answer, the placeholders and the
question are new input. The cold path has no such prefix: the light model reads the rendered
backlog in pages. A run that cannot take either (no credentials in memory after a restart, no
price to keep the spend cap) is recorded as skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.config import Settings
from ember.errors import StorageUnavailable
from ember.exchange import UpstreamClient, UrlFor
from ember.facts import NewMemory, provenance
from ember.prices import PriceTable
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC, BY_NAME
from ember.protocols.base import ProtocolAdapter, Usage
from ember.protocols.forking import ForkRefused, fork_request
from ember.protocols.plain import plain_path, plain_request
from ember.shadow import cursors, evidence, promote_later, question, runs, spend
from ember.shadow.calls import CallCut, CallResult, account, call
from ember.shadow.known import remembered
from ember.shadow.metrics import ShadowMetrics
from ember.shadow.models import (
    CallUsage,
    FactIn,
    ParsedFact,
    RunStatus,
    Trigger,
    parse_facts,
)
from ember.shadow.planning import (
    DEFAULT_LIGHT,
    Plan,
    cold_estimate,
    hot_estimate,
    hot_fresh_tokens,
    hot_refusal,
    model_of,
)
from ember.shadow.policy import hot_blocker
from ember.shadow.prefix import Prefix, PrefixBook
from ember.shadow.settings import ShadowSettings
from ember.shadow.spend_share import Budget
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.registry import Storage
from ember.store.transcript_rows import Message, by_ids, unread

log = logging.getLogger(__name__)

#: Output allowed for one cold page's answer.
COLD_MAX_TOKENS = 2000

#: Validated facts become memories: (project, session, [(proposal id, fact)]) -> the memory
#: id of each proposal (the steward's hook has the same shape).
Promote = Callable[[ProjectRef, str, Sequence[tuple[str, FactIn]]], Awaitable[Mapping[str, str]]]
Later = Callable[[Coroutine[Any, Any, Any], str], object]


@dataclass(frozen=True)
class RunRecord:
    """What a run left behind, for the scheduler (backoff) and the steward (same window)."""

    id: str
    status: str
    through_seq: int


@dataclass
class RunRequest:
    session_id: str
    generation: int
    project: ProjectRef
    trigger: Trigger
    #: the session's wire format (the cold path speaks it to the same provider)
    protocol: str | None = None
    abort: threading.Event = field(default_factory=threading.Event)


class ShadowRunner:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        upstream: UpstreamClient,
        url_for: UrlFor,
        prefixes: PrefixBook,
        prices: PriceTable,
        promote: Promote | None = None,
        page_tokens: int = question.PAGE_TOKENS,
        metrics: ShadowMetrics | None = None,
        known: question.Known | None = None,
    ) -> None:
        self.settings = settings
        self.known = known
        self.metrics = metrics or ShadowMetrics()
        self.page_tokens = page_tokens
        self.storage = storage
        self.upstream = upstream
        self.url_for = url_for
        self.prefixes = prefixes
        self.prices = prices
        self.promote = promote
        #: where work outliving a run goes (the service's task set); None: nowhere
        self.later: Later | None = None

    def database(self, project: ProjectRef) -> Database:
        return self.storage.database(project.db_path(self.settings.home))

    async def run(self, req: RunRequest) -> RunRecord | None:
        """Run once; None when there was nothing new to read."""
        db = self.database(req.project)
        if db.health.held:
            # writes held through an outage may be this session's messages: a read now would
            # call them read before they are there (the run is asked for again)
            raise StorageUnavailable(f"{db.where} still holds writes from an outage")
        # refused while the store is off, nothing is lost: the run is asked for again
        cursor, messages = await db.awrite(lambda c: _backlog(c, req), label="shadow", retried=True)
        if not messages:
            return None
        plan = await self._plan(db, req, messages, cursor.ready)
        run_id = runs.new_id("r")
        through = messages[-1].seq
        skip = plan.skip
        if skip is not None:
            await db.awrite(
                lambda c: runs.skip_run(
                    c,
                    run_id,
                    req.session_id,
                    req.generation,
                    plan.path,
                    req.trigger,
                    skip,
                    model=plan.model,
                )
            )
            self.metrics.run("skipped", plan.path)
            _said(req, run_id, "skipped")
            return RunRecord(run_id, "skipped", through)
        await db.awrite(
            lambda c: runs.start_run(
                c,
                run_id,
                req.session_id,
                req.generation,
                plan.path,
                req.trigger,
                plan.model,
                messages[0].seq,
                through,
            )
        )
        status = await self._execute(db, req, plan, run_id)
        self.metrics.run(status, plan.path)
        return RunRecord(run_id, status, through)

    # -- deciding ------------------------------------------------------------------------

    async def _plan(
        self, db: Database, req: RunRequest, messages: list[Message], ready: int
    ) -> Plan:
        prefix = self.prefixes.get(req.session_id)
        protocol = prefix.adapter.name if prefix else (req.protocol or "anthropic")
        known = await remembered(self.known, req.project, req.session_id)
        blocker = hot_blocker(
            prefix is not None,
            prefix is not None and prefix.generation == req.generation,
            hot_refusal(prefix) if prefix is not None else None,
        )
        if blocker is None and prefix is not None:
            plan = Plan(
                "hot",
                model_of(prefix),
                messages,
                ready,
                hot_estimate(prefix, messages, known, self.prices),
                prefix,
                protocol=protocol,
                known=known,
            )
        else:
            plan = self._cold_plan(req, messages, ready, protocol, prefix)
            plan.known = known
        if plan.skip is None:
            budget = await self.budget(db, plan.model)
            plan.skip = budget.refusal(plan.estimate)
        return plan

    async def budget(self, db: Database, model: str | None) -> Budget:
        """The project's budget window, its allowance priced at ``model``'s input (None: the
        model its clients used last)."""
        share = self.settings.section(ShadowSettings).shadow_max_share
        allowance = float(self.settings.section(ShadowSettings).shadow_allowance_tokens)
        return await db.aread(
            lambda c: spend.project_budget(c, share, allowance, self.prices, model)
        )

    def _cold_plan(
        self,
        req: RunRequest,
        messages: list[Message],
        ready: int,
        protocol: str,
        prefix: Prefix | None,
    ) -> Plan:
        adapter = BY_NAME.get(protocol, ANTHROPIC)
        model = self.settings.section(ShadowSettings).light_model or DEFAULT_LIGHT.get(
            adapter.family, DEFAULT_LIGHT[ANTHROPIC.family]
        )
        creds = prefix.credentials() if prefix is not None else None
        path = str(self.database(req.project).path)
        creds = creds or self.prefixes.credentials(path, adapter.family)
        key = self.settings.section(ShadowSettings).light_api_key
        if not creds and key:
            creds = adapter.key_headers(key)
        estimate = cold_estimate(messages, self.page_tokens, protocol, self.prices.lookup(model))
        plan = Plan("cold", model, messages, ready, estimate, protocol=protocol, credentials=creds)
        if not creds:
            plan.skip = (
                "no credentials in memory (none of this project's sessions sent a request "
                "within the cache TTL; after a restart, say) and no light_api_key configured"
            )
        return plan

    # -- doing ---------------------------------------------------------------------------

    async def _execute(self, db: Database, req: RunRequest, plan: Plan, run_id: str) -> str:
        """The run's calls and its one write; returns its final status."""
        started = time.perf_counter()
        results: list[CallResult] = []
        try:
            if plan.path == "hot":
                results.append(await self._hot(db, req, plan))
            else:
                results.extend(await self._cold(db, req, plan))
        except ForkRefused as exc:  # checked before, so only an answer of an unforeseen shape
            finish = runs.Finish("failed", [], None, f"fork refused: {exc}", _ms(started))
            await db.awrite(lambda c: runs.finish_run(c, run_id, finish))
            return "failed"
        except asyncio.CancelledError as exc:
            # A user message sets the abort before cancelling; anything else that cancels a
            # run is ember stopping (the task set cancelled at shutdown), not the user. A call
            # cut short was still asked (and billed): the run carries what it cost.
            by_user = req.abort.is_set()
            if isinstance(exc, CallCut):
                results.append(exc.result)
            why = "interrupted by a user message" if by_user else "interrupted: ember stopped"
            if any(r.estimated for r in results):
                why += " (the cut call's usage is estimated)"
            finish = runs.Finish(
                "cancelled",
                [r.usage for r in results],
                why,
                "interrupted-by-user" if by_user else "interrupted-by-shutdown",
                _ms(started),
                self.prices.snapshot,
                plan.model,
            )
            db.submit(lambda c: runs.finish_run(c, run_id, finish), label="shadow")
            self.metrics.run("cancelled", plan.path)
            _said(req, run_id, "cancelled")
            raise
        return await self._finish(db, req, plan, run_id, results, _ms(started))

    async def _hot(self, db: Database, req: RunRequest, plan: Plan) -> CallResult:
        prefix = plan.prefix
        assert prefix is not None
        ask = question.hot_question(plan.messages, req.session_id, prefix.propose_tool, plan.known)
        body = fork_request(prefix.adapter, prefix.sent, prefix.answer, ask)
        url = self.url_for(prefix.adapter, prefix.path, prefix.query)
        # if it is cut before the provider reports usage: the prefix read from the cache,
        # the answer and the question fresh (as ``planning.hot_estimate``)
        fresh = hot_fresh_tokens(ask, prefix)
        guess = Usage(input_tokens=fresh, cache_read_tokens=prefix.input_tokens)
        return await self._call(
            db, req, prefix.adapter, url, prefix.headers, body, plan.model, guess
        )

    async def _cold(self, db: Database, req: RunRequest, plan: Plan) -> list[CallResult]:
        adapter = BY_NAME.get(plan.protocol, ANTHROPIC)
        url = self.url_for(adapter, plain_path(adapter.name, plan.model or ""), "")
        out = []
        for page in question.cold_pages(plan.messages, self.page_tokens):
            system, user = question.cold_prompt(page, req.session_id, plan.known)
            body = plain_request(adapter.name, plan.model or "", system, user, COLD_MAX_TOKENS)
            result = await self._call(
                db, req, adapter, url, plan.credentials or [], body, plan.model
            )
            out.append(result)
            if not result.ok:
                break
        return out

    async def _call(
        self,
        db: Database,
        req: RunRequest,
        adapter: ProtocolAdapter,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes,
        model: str | None,
        guess: Usage | None = None,
    ) -> CallResult:
        """One call, accounted whatever became of it: a call cancelled after it went out is
        accounted before the cancellation goes on (``CallCut``)."""
        started = time.perf_counter()

        def accounted(result: CallResult) -> CallResult:
            self.metrics.call("shadow", result.usage)
            account(
                db,
                result,
                session_id=req.session_id,
                project=req.project.identity,
                protocol=adapter.name,
                origin="shadow",
                started=started,
                prices=self.prices,
            )
            return result

        try:
            result = await call(
                self.upstream, adapter, url, headers, body, model, self.prices, guess=guess
            )
        except CallCut as cut:
            accounted(cut.result)
            raise
        return accounted(result)

    async def _finish(
        self,
        db: Database,
        req: RunRequest,
        plan: Plan,
        run_id: str,
        results: list[CallResult],
        latency_ms: float,
    ) -> str:
        usages: list[CallUsage] = [r.usage for r in results]
        failed = next((r for r in results if not r.ok), None)
        facts: list[ParsedFact] = []
        error = failed.error if failed is not None else None
        if failed is None:
            try:
                tool = plan.prefix.propose_tool if plan.prefix is not None else None
                for r in results:
                    assert r.answer is not None
                    facts.extend(parse_facts(question.answer_batch(r.answer, tool)))
            except ValueError as exc:
                error = f"the answer did not follow the contract: {exc}"
        checked = await self._check(db, req, question.shown_supersedes(facts, plan.known))
        status: RunStatus = "failed" if error else "completed"
        finish = runs.Finish(
            status, usages, None, error, latency_ms, self.prices.snapshot, plan.model
        )
        valid = await db.awrite(
            lambda c: runs.finish_run(c, run_id, finish, checked, req.session_id, req.abort)
        )
        if req.abort.is_set():
            _said(req, run_id, "cancelled")
            return "cancelled"
        stored: list[str] = []
        if (
            valid
            and self.promote is not None
            and self.settings.section(ShadowSettings).shadow == "primary"
        ):
            good = [f.fact for f, e in checked if e is None and f.fact is not None]
            stored = await self._promote(db, req, list(zip(valid, good, strict=True)))
        _said(req, run_id, status, stored)
        return status

    async def _promote(
        self, db: Database, req: RunRequest, pairs: list[tuple[str, FactIn]]
    ) -> list[str]:
        """The facts as memories; returns their ids. A store that went away since the run
        was recorded gets them once it is back (``promote_later``)."""
        try:
            return await self._promote_now(db, req, pairs)
        except Exception as exc:
            if not promote_later.store_down(exc):
                log.exception("promoting the shadow's facts of session %s failed", req.session_id)
                return []
        if self.later is not None:
            what = f"{len(pairs)} facts of session {req.session_id}"
            again = promote_later.when_back(db, lambda: self._promote_now(db, req, pairs), what)
            self.later(again, f"shadow-promote:{req.session_id}")
        return []

    async def _promote_now(
        self, db: Database, req: RunRequest, pairs: list[tuple[str, FactIn]]
    ) -> list[str]:
        assert self.promote is not None
        linked = await self.promote(req.project, req.session_id, pairs)

        def link(conn: Connection) -> None:
            for pid, mid in linked.items():
                runs.link_memory(conn, pid, mid)

        # refused, it is tried again (``promote_later``): not counted as a lost write then
        await db.awrite(link, label="shadow", retried=self.later is not None)
        return list(linked.values())

    async def _check(
        self, db: Database, req: RunRequest, facts: list[ParsedFact]
    ) -> list[tuple[ParsedFact, str | None]]:
        ids = sorted({e.messageId for f in facts if f.fact for e in f.fact.evidence if e.messageId})
        found = await db.aread(lambda c: by_ids(c, ids)) if ids else {}
        out = []
        for f in facts:
            error = f.error
            if error is None and f.fact is not None:
                error = evidence.check(f.fact, req.session_id, found)
            out.append((f, error))
        return out


def _said(req: RunRequest, run_id: str, status: str, stored: Sequence[str] = ()) -> None:
    """The run's line in the proxy's log: counts and ids only, never a fact's text."""
    log.info(
        "shadow: session %s stored %d facts (ids %s); run %s %s",
        req.session_id,
        len(stored),
        ",".join(stored) or "-",
        run_id,
        status,
    )


def _backlog(conn: Connection, req: RunRequest) -> tuple[cursors.Cursor, list[Message]]:
    cursors.activate(conn)
    cursor = cursors.ensure_cursor(conn, req.session_id, req.generation)
    return cursor, unread(conn, req.session_id, req.generation, cursor.ready)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def memories_for_promotion(
    facts: Sequence[tuple[str, FactIn]],
    session_id: str,
    digests: Mapping[str, str] | None = None,
    source: str = "shadow",
) -> list[NewMemory]:
    """Validated facts as project-wide memories (any later session may need them), with
    their evidence and where they came from: the session, and the digests of the messages the
    evidence names (``digests``: by message id), so injection can tell a conversation that
    already holds them (``ember.memory.echo``)."""
    digests = digests or {}
    return [
        NewMemory(
            fact.content,
            importance=0.6,
            category=fact.category,
            metadata=provenance(
                {"source": source, "session": session_id, "proposal": proposal_id},
                [digests[m] for e in fact.evidence if (m := e.messageId) and m in digests],
            ),
            evidence=tuple(evidence.as_memory_evidence(fact)),
            supersedes=tuple(fact.supersedes or ()),
        )
        for proposal_id, fact in facts
    ]
