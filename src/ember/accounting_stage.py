"""The accounting stage: one row per exchange in the project's database.

Where rows go: the project's ``ember.db`` when the request names a project, else the global
``$EMBER_HOME/stats.db`` — accounting holds token counts and costs, not content, so keeping it
for unresolved requests leaks nothing across projects. The row is queued on the database's
writer and never awaited: the answer is already with the client.

One session, one database: a request that names no project takes its session's. Claude Code
sends its title request (no working directory in it) beside the session's first turn, and its
answer can be back before the turn that names the project arrives; so in a session's first
``HOLD_SECONDS`` such a row is held until the session names its project (or the time is up,
then it goes to ``stats.db``). A ``kill -9`` can lose those held rows too.

Each row is also counted in the app's metrics (``ember.metrics.ExchangeMetrics``) from the same
record, when it is made: ``/metrics`` and ``ember stats`` add up the same tokens and costs.

Each answer is journaled before its last byte reaches the client (``on_answered``:
``store.journal``) and retired once its row is written or counted as dropped, so a ``kill
-9`` loses rows with a count: the next start looks the journal's answers up
(``store.journalcheck``) and says how many have no row.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from ember.errors import StorageError
from ember.exchange import Exchange, Outcome, Services, Stage
from ember.metrics import ExchangeMetrics
from ember.prices import PriceTable
from ember.project import ProjectRef
from ember.sessions import SessionRegistry
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.journal import AnswerJournal, Segment, journal_dir
from ember.store.journalcheck import recount
from ember.store.registry import Storage
from ember.usage_estimate import estimate_usage

log = logging.getLogger(__name__)


#: How long into a session a row that names no project waits for the session to name one.
HOLD_SECONDS = 10.0
#: Outcomes in which the provider generated nothing: with no usage reported they cost $0
#: (a priced model), where any other failure without usage costs "unknown".
#: Outcomes whose answer the provider began, so it billed the prompt: without the usage it
#: reports (a Chat stream without include_usage, a stream cut or left before its end) the row
#: is estimated (``usage_estimate``), marked as such, never of unknown cost.
_ESTIMATED = frozenset({"ok", "cut", "cancelled"})
_NOTHING_BILLED = ("upstream_error", "unreachable", "timeout", "refused")


def _after_a_stop(storage: Storage, directory: Path) -> None:
    """What earlier processes left: their held writes delivered (a PostgreSQL store's write
    journal), then their answers without a row counted — a row delivered is not missing."""
    storage.deliver_left()
    recount(storage, directory)


class AccountingStage(Stage):
    name = "accounting"
    #: Last in the pipeline (its request sees every stage's notes), first on the response: its
    #: row is queued the moment the answer is out, not after memory, shadow and the others
    #: have done their work on it (seconds under load, and a kill -9 then lost those rows).
    response_order = -2

    def __init__(
        self,
        storage: Storage,
        prices: PriceTable,
        sessions: SessionRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage = storage
        self.prices = prices
        self.sessions = sessions
        self._clock = clock
        self._held: dict[str, tuple[float, list[tuple[ExchangeRecord, _Ticket | None]]]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.metrics: ExchangeMetrics | None = None
        self.journal: AnswerJournal | None = None

    async def start(self, services: Services) -> None:
        self.metrics = ExchangeMetrics(services.metrics, self.prices)
        directory = journal_dir(self.storage.home)
        try:
            self.journal = await asyncio.to_thread(AnswerJournal, directory)
        except OSError as exc:
            log.warning(
                "the answer journal cannot be kept in %s (%s): a kill -9 may lose accounting "
                "rows without a count",
                directory,
                exc,
            )
        services.tasks.spawn(
            asyncio.to_thread(_after_a_stop, self.storage, directory), name="accounting-recount"
        )
        self._sweeper = asyncio.create_task(self._sweep(), name="accounting-hold")

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = self._clock()
            for session_id in [s for s, (until, _) in self._held.items() if until <= now]:
                self._release(session_id, None)
            if self.journal is not None:
                await asyncio.to_thread(self.journal.sync)

    def on_answered(self, ex: Exchange) -> None:
        """Journal the answer before its last byte goes out (``store.journal``)."""
        if self.journal is None:
            return
        project = self.project(ex)
        db = project.db_path(self.storage.home) if project is not None else None
        segment = self.journal.answered(ex.wall_started, ex.session_id, db)
        ex.state[self.name] = _Ticket(segment, named=db is not None)

    async def on_request(self, ex: Exchange) -> None:
        if ex.session_id in self._held and ex.project is not None:
            self._release(ex.session_id, ex.project)

    def _release(self, session_id: str, project: ProjectRef | None) -> None:
        _, records = self._held.pop(session_id, (0.0, []))
        identity = project.identity if project is not None else None
        for record, ticket in records:
            self._write(replace(record, project=identity), project, ticket)

    def _hold(self, record: ExchangeRecord, ticket: _Ticket | None) -> bool:
        """Keep a row that names no project while its session is young (True when held)."""
        age = self.sessions.age(record.session_id) if self.sessions is not None else None
        if age is None or age >= HOLD_SECONDS:
            return False
        until, records = self._held.get(record.session_id, (0.0, []))
        records.append((record, ticket))
        self._held[record.session_id] = (until or self._clock() + HOLD_SECONDS - age, records)
        return True

    def _write(
        self, record: ExchangeRecord, project: ProjectRef | None, ticket: _Ticket | None = None
    ) -> None:
        db = self.database(project)
        done = db.submit(record.insert, label="accounting")
        done.add_done_callback(_log_failure)
        journal = self.journal
        if ticket is None or journal is None:
            return
        if not ticket.named:  # journaled before its session named its project
            journal.moved(record.ts, record.session_id, db.path)
        done.add_done_callback(lambda _: journal.retire(ticket.segment))

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self.settle()
        if self.journal is not None:
            self.journal.close()  # each segment goes once the databases' close wrote its rows

    async def settle(self) -> None:
        """Write the held rows now, where their sessions went (shutdown, tests, the demo)."""
        for session_id in list(self._held):
            bound = self.sessions.project_of(session_id) if self.sessions is not None else None
            self._release(session_id, bound)

    def project(self, ex: Exchange) -> ProjectRef | None:
        """The project, decided after the answer: a request that named none (Claude Code's
        title request, sent beside the session's first turn) goes where its session went, so
        one session never lands in two databases."""
        if ex.project is None and self.sessions is not None:
            return self.sessions.project_of(ex.session_id)
        return ex.project

    def database(self, project: ProjectRef | None) -> Database:
        if project is not None:
            return self.storage.database(project.db_path(self.storage.home))
        return self.storage.stats()

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        msg = outcome.message
        usage = msg.usage if msg is not None else None
        estimated = False
        if usage is None and msg is not None and outcome.kind in _ESTIMATED:
            # A whole answer without usage (an OpenAI Chat stream requested without
            # stream_options.include_usage), or one the provider began and that broke off or
            # that its client left before the usage came: the provider read the prompt and
            # bills it, so the row is estimated (and says so) rather than of unknown cost.
            usage, estimated = estimate_usage(outcome.conversation(ex), msg), True
        model = (msg.model if msg is not None and msg.model else None) or ex.model
        cost = self.prices.cost(model, usage)
        refused = usage is None and outcome.kind in _NOTHING_BILLED
        if cost is None and refused and self.prices.lookup(model):
            cost = 0.0  # the provider refused (or was never reached): nothing billed
        # A stream (or JSON body) that failed midway may have generated (and billed) tokens it
        # never reported: without usage its cost stays unknown rather than a made-up $0.
        project = self.project(ex)
        record = ExchangeRecord(
            ts=ex.wall_started,
            session_id=ex.session_id,
            project=project.identity if project else None,
            protocol=ex.adapter.name,
            model=model,
            # what the client saw: the HTTP status it got (a 200 holding an error stays 200;
            # the provider's error type is error_type), and whether it asked for a stream —
            # a streamed request answered with a JSON error is still a streamed request
            status=outcome.status,
            outcome=outcome.kind,
            stream=ex.stream or outcome.streamed,
            usage=usage,
            usage_estimated=estimated,
            cost_usd=cost,
            price_snapshot=self.prices.snapshot,
            latency_ms=outcome.latency_ms,
            ttfb_ms=outcome.ttfb_ms,
            thread=ex.thread.id if ex.thread else ex.session_id,
            thread_kind=ex.thread.kind if ex.thread else "main",
            error_type=msg.error.type if msg is not None and msg.error is not None else None,
            notes=orjson.dumps(ex.notes).decode() if ex.notes else None,
        )
        rows = [record, *self._hidden_rows(record, outcome)]
        if self.metrics is not None:
            for i, row in enumerate(rows):
                self.metrics.observe(row, timed=i == 0)
        ticket = ex.state.get(self.name)  # the client's row is the journaled one
        for i, row in enumerate(rows):
            mine = ticket if i == 0 else None
            if project is None and self._hold(row, mine):
                continue
            self._write(row, project, mine)

    def _hidden_rows(self, record: ExchangeRecord, outcome: Outcome) -> list[ExchangeRecord]:
        """One row per round of ember-owned tool calls the client never saw (origin
        ``owned_tools``): billed like any call, kept out of the session's own totals."""
        return [
            replace(
                record,
                model=r.model or record.model,
                status=200,
                outcome="ok",
                usage=r.usage,
                usage_estimated=False,
                cost_usd=self.prices.cost(r.model or record.model, r.usage),
                origin="owned_tools",
                notes=None,
                error_type=None,
            )
            for r in outcome.hidden
        ]


@dataclass(frozen=True)
class _Ticket:
    """An answer's journal entry: its segment, and whether it named the row's database."""

    segment: Segment | None
    named: bool


def _log_failure(done: Future[None]) -> None:
    exc = done.exception()
    if exc is not None and not isinstance(exc, StorageError):
        # StorageError is reported once by the database's health; anything else is a bug.
        log.error("accounting row not written: %r", exc)
