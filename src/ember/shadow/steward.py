"""The steward: the cold central extractor the shadow is measured against (the baseline).

It reads a session's backlog the old way — rendered cold pages (the user's words whole, the
rest shortened) read from scratch by the *session's own model*, with no cached prefix. That is
the cost the hot shadow turn has to beat, so it is paid for real, with the same rules, the same
evidence checks and the same accounting (``origin`` ``steward``), into tables of its own.

Which rows it reads — the same window as the shadow, so the comparison is apples to apples:
- never before the shadow's own starting line: the steward makes sure the shadow's cursor for
  the generation exists *before* it digests anything (``cursors.ensure_cursor``), so the shadow
  never inherits a mark the steward set during the comparison, and both start at the same
  baseline (history from before shadow memory was enabled is read by neither);
- never twice: only rows past what the steward already digested of that generation
  (``steward_digested.through_seq``);
- up to ``through_seq`` when the caller gives it (the runner passes the shadow run's own
  ``through_seq``: both then read exactly the same rows), else the generation's last row.

A run is written in one job — its row, its facts (an invalid fact kept with its
``validation_error`` beside its valid siblings), their evidence, and the digested mark — so a
``kill -9`` leaves either all of it or none of it. The mark only moves on a completed run: a
failed page leaves the whole window to the next run (no fact of a failed run is kept, or the
next run would write it twice). Three failures in a row for one generation back off six hours,
as the shadow does; failures are charged all the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember.errors import StorageUnavailable
from ember.exchange import UpstreamClient, UrlFor
from ember.prices import PriceTable
from ember.project import ProjectRef
from ember.protocols import ADAPTERS
from ember.protocols.base import ProtocolAdapter
from ember.protocols.plain import PATHS, plain_request
from ember.shadow import calls, cursors, evidence, runs
from ember.shadow.known import remembered
from ember.shadow.metrics import ShadowMetrics
from ember.shadow.models import CallUsage, FactIn, ParsedFact, RunStatus, parse_facts
from ember.shadow.policy import Backoff
from ember.shadow.question import (
    PAGE_TOKENS,
    Known,
    Remembered,
    cold_pages,
    cold_prompt,
    parse_answer,
    shown_supersedes,
)
from ember.shadow.runs import STEWARD_TABLES, Finish
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.registry import Storage
from ember.store.transcript_rows import Message, by_ids, unread

log = logging.getLogger(__name__)

ORIGIN = "steward"
#: Output allowed per page: a page's facts, never a summary of it.
MAX_OUTPUT_TOKENS = 4096

STEWARD_SYSTEM = """You are the memory steward of a software project. You read excerpts of one \
of its coding agent's sessions, after the fact, and extract the facts worth remembering for \
later sessions of the same project. Each message is listed as "m:<id> <kind>: <text>"; the \
user's messages are whole, the assistant's messages and tool results are shortened.
"""

#: ``(project, session_id, [(steward fact id, fact), ...])`` -> ``{fact id: memory id}``: makes
#: the checked facts production memories (mode ``compare``: the steward's facts are the ones
#: served while the shadow is judged). Raising is logged and leaves the facts unpromoted.
Promote = Callable[[ProjectRef, str, Sequence[tuple[str, FactIn]]], Awaitable[Mapping[str, str]]]

_BY_NAME: dict[str, ProtocolAdapter] = {a.name: a for a in ADAPTERS.values()}


@dataclass(frozen=True)
class Window:
    """The rows one steward run reads: ``after`` < seq <= the last message's seq."""

    after: int
    messages: list[Message]

    @property
    def from_seq(self) -> int:
        return self.messages[0].seq if self.messages else self.after

    @property
    def through_seq(self) -> int:
        return self.messages[-1].seq if self.messages else self.after


def window_start(conn: Connection, session_id: str, generation: int) -> int:
    """The seq after which the steward reads (a write job: it may initialise the shadow's
    cursor, see the module docstring)."""
    cursors.activate(conn)
    cursor = cursors.ensure_cursor(conn, session_id, generation)
    row = conn.execute(
        "SELECT through_seq FROM steward_digested WHERE session_id=? AND generation=?",
        (session_id, generation),
    ).fetchone()
    return max(cursor.baseline, int(row[0]) if row is not None else 0)


def read_window(
    conn: Connection, session_id: str, generation: int, after: int, through_seq: int | None
) -> Window:
    messages = unread(conn, session_id, generation, after)
    if through_seq is not None:
        messages = [m for m in messages if m.seq <= through_seq]
    return Window(after, messages)


def session_model(conn: Connection, session_id: str, protocol: str) -> str | None:
    """The model of the session's own thread, as its latest client request used it (never a
    title request's or a sub-agent's light model: the steward's cost is the strong re-read)."""
    row = conn.execute(
        "SELECT model FROM exchanges WHERE session_id=? AND protocol=? AND origin='client' "
        "AND model IS NOT NULL AND (thread_kind IS NULL OR thread_kind='main') "
        "ORDER BY ts DESC, id DESC LIMIT 1",
        (session_id, protocol),
    ).fetchone()
    return str(row[0]) if row is not None else None


def mark_digested(conn: Connection, session_id: str, generation: int, through_seq: int) -> None:
    """The steward's digested mark only ever moves forward. (A CASE, not SQLite's two-argument
    MAX or PostgreSQL's GREATEST: both backends speak it.)"""
    conn.execute(
        "INSERT INTO steward_digested (session_id, generation, through_seq) VALUES (?,?,?) "
        "ON CONFLICT (session_id, generation) DO UPDATE SET through_seq = CASE "
        "WHEN excluded.through_seq > steward_digested.through_seq THEN excluded.through_seq "
        "ELSE steward_digested.through_seq END",
        (session_id, generation, through_seq),
    )


@dataclass
class _Outcome:
    """What reading the pages produced, before it is written."""

    calls: list[CallUsage]
    facts: list[ParsedFact]
    error: str | None
    latency_ms: float


@dataclass(frozen=True)
class _Job:
    """One run's fixed values."""

    db: Database
    project: ProjectRef
    session_id: str
    generation: int

    @property
    def key(self) -> tuple[Path, str, int]:
        return (self.db.path, self.session_id, self.generation)


class Steward:
    """Runs the cold central extractor for one session generation at a time.

    Everything it touches comes in through the constructor as plain values, so it runs the
    same against a provider or the emulator: ``upstream`` (``ember.exchange.UpstreamClient``),
    ``url_for`` (the provider URL for an adapter, path and query), ``storage`` (the process's
    database owners) and ``prices`` (the snapshot every call is charged at). ``promote``
    makes a completed run's checked facts memories (mode ``compare``); without it they stay
    in the steward's tables only.
    """

    def __init__(
        self,
        storage: Storage,
        upstream: UpstreamClient,
        url_for: UrlFor,
        prices: PriceTable,
        *,
        promote: Promote | None = None,
        page_tokens: int = PAGE_TOKENS,
        clock: Callable[[], float] = time.monotonic,
        metrics: ShadowMetrics | None = None,
        known: Known | None = None,
    ) -> None:
        self.storage = storage
        self.known = known
        self.metrics = metrics or ShadowMetrics()
        self.upstream = upstream
        self.url_for = url_for
        self.prices = prices
        self.promote = promote
        self.page_tokens = page_tokens
        self._clock = clock
        self._running: set[tuple[Path, str, int]] = set()
        self._backoff: dict[tuple[Path, str, int], Backoff] = {}

    def backoff(self, project: ProjectRef, session_id: str, generation: int) -> Backoff:
        """The generation's failure record (for the runner's reports and tests)."""
        key = (project.db_path(self.storage.home), session_id, generation)
        return self._backoff.get(key, Backoff())

    async def run(
        self,
        session_id: str,
        generation: int,
        project: ProjectRef,
        protocol: str,
        credentials: Sequence[tuple[str, str]] | None,
        *,
        model: str | None = None,
        through_seq: int | None = None,
    ) -> str | None:
        """Digest the generation's unread window; the run's id, or None when no run was due
        (nothing unread, a run of the same generation already going, backing off).

        ``protocol``: the adapter name (``anthropic``, ``openai_chat``, ``openai_responses``).
        ``credentials``: the headers to call as the client (``Prefix.credentials()``); none
        records a skipped run, with why. ``model``: the session's model (default: the model
        of the session's latest own request, from its accounting rows). ``through_seq``: read
        no further (the shadow run's own ``through_seq``, so both read the same rows)."""
        db = self.storage.database(project.db_path(self.storage.home))
        job = _Job(db, project, session_id, generation)
        if job.key in self._running:
            return None
        if self._backoff.get(job.key, Backoff()).active(self._clock()):
            log.info("steward: backing off a generation after repeated failures")
            return None
        self._running.add(job.key)
        try:
            return await self._run(job, protocol, credentials, model, through_seq)
        finally:
            self._running.discard(job.key)

    async def _run(
        self,
        job: _Job,
        protocol: str,
        credentials: Sequence[tuple[str, str]] | None,
        model: str | None,
        through_seq: int | None,
    ) -> str | None:
        session_id, generation = job.session_id, job.generation
        after = await job.db.awrite(
            lambda c: window_start(c, session_id, generation), label="steward:window"
        )
        window = await job.db.aread(
            lambda c: read_window(c, session_id, generation, after, through_seq)
        )
        if not window.messages:
            return None
        if model is None:
            model = await job.db.aread(lambda c: session_model(c, session_id, protocol))
        adapter = _BY_NAME.get(protocol)
        skip = _skip_reason(adapter, model, credentials)
        if skip is not None or adapter is None or model is None or not credentials:
            empty = _Outcome([], [], None, 0.0)
            return await self._write(job, window, model, empty, skip or "nothing to call with")
        known = await remembered(self.known, job.project, session_id)
        outcome = await self._read_pages(job, adapter, model, list(credentials), window, known)
        if outcome.error is None:
            self._backoff.pop(job.key, None)
        else:
            failures = self._backoff.get(job.key, Backoff())
            self._backoff[job.key] = failures.failed(self._clock())
        return await self._write(job, window, model, outcome, None)

    async def _read_pages(
        self,
        job: _Job,
        adapter: ProtocolAdapter,
        model: str,
        credentials: list[tuple[str, str]],
        window: Window,
        known: list[Remembered],
    ) -> _Outcome:
        """One call per cold page, each accounted with origin ``steward``; stops at the first
        page that fails (what it cost is kept)."""
        began = time.perf_counter()
        used: list[CallUsage] = []
        facts: list[ParsedFact] = []
        url = self.url_for(adapter, PATHS[adapter.name], "")
        pages = cold_pages(window.messages, self.page_tokens)
        for number, page in enumerate(pages, 1):
            _, user = cold_prompt(page, job.session_id, known)
            body = plain_request(adapter.name, model, STEWARD_SYSTEM, user, MAX_OUTPUT_TOKENS)
            started = time.perf_counter()
            result = await calls.call(
                self.upstream, adapter, url, credentials, body, model, self.prices
            )
            self.metrics.call(ORIGIN, result.usage)
            calls.account(
                job.db,
                result,
                session_id=job.session_id,
                project=job.project.identity,
                protocol=adapter.name,
                origin=ORIGIN,
                started=started,
                prices=self.prices,
            )
            used.append(result.usage)
            where = f"page {number} of {len(pages)}"
            if not result.ok or result.answer is None:
                return _Outcome(used, [], f"{where}: {result.error}", _ms(began))
            try:
                facts.extend(shown_supersedes(parse_facts(parse_answer(result.answer.text)), known))
            except ValueError as exc:
                return _Outcome(used, [], f"{where}: {exc}", _ms(began))
        return _Outcome(used, facts, None, _ms(began))

    def _finish(self, model: str | None, outcome: _Outcome, skipped: str | None) -> Finish:
        if skipped is not None:
            return Finish("skipped", reason=skipped, model=model)
        status: RunStatus = "failed" if outcome.error is not None else "completed"
        return Finish(
            status,
            outcome.calls,
            error=outcome.error,
            latency_ms=outcome.latency_ms,
            price_snapshot=self.prices.snapshot,
            model=model,
        )

    async def _write(
        self, job: _Job, window: Window, model: str | None, outcome: _Outcome, skipped: str | None
    ) -> str:
        """The run, its facts and evidence, and the digested mark: one job."""
        run_id = runs.new_id("st")
        finish = self._finish(model, outcome, skipped)

        def write(conn: Connection) -> list[tuple[str, FactIn]]:
            runs.start_run(
                conn,
                run_id,
                job.session_id,
                job.generation,
                "cold",  # the steward's table has neither path nor trigger: not stored
                "steward",
                model,
                window.from_seq,
                window.through_seq,
                tables=STEWARD_TABLES,
            )
            checked = check_facts(conn, outcome.facts, job.session_id)
            ids = runs.finish_run(
                conn, run_id, finish, checked, job.session_id, tables=STEWARD_TABLES
            )
            if finish.status == "completed":
                mark_digested(conn, job.session_id, job.generation, window.through_seq)
            valid = [f.fact for f, error in checked if error is None and f.fact is not None]
            return list(zip(ids, valid, strict=True))

        promotable = await job.db.awrite(write, label="steward:run")
        if promotable and self.promote is not None:
            await self._promote(self.promote, job, run_id, promotable)
        return run_id

    async def _promote(
        self, promote: Promote, job: _Job, run_id: str, facts: list[tuple[str, FactIn]]
    ) -> None:
        """Fail open: a memory store that cannot take the facts leaves them in the steward's
        tables, unpromoted, and the run stands."""
        try:
            made = await promote(job.project, job.session_id, facts)

            def link(conn: Connection) -> None:
                for fact_id, memory_id in made.items():
                    runs.link_memory(conn, fact_id, memory_id, STEWARD_TABLES)

            await job.db.awrite(link, label="steward:promote")
        except StorageUnavailable:  # the database said so itself, once
            pass
        except Exception:
            log.exception("steward run %s: promoting its facts failed", run_id)


def check_facts(
    conn: Connection, facts: Sequence[ParsedFact], session_id: str
) -> list[tuple[ParsedFact, str | None]]:
    """Each fact with what is wrong with it: its schema error, else the service's evidence
    checks against the transcript as it is in this transaction."""
    ids = [
        e.messageId
        for f in facts
        if f.fact is not None
        for e in f.fact.evidence
        if e.messageId is not None
    ]
    found = by_ids(conn, ids)
    return [
        (f, f.error if f.fact is None else evidence.check(f.fact, session_id, found)) for f in facts
    ]


def _skip_reason(
    adapter: ProtocolAdapter | None,
    model: str | None,
    credentials: Sequence[tuple[str, str]] | None,
) -> str | None:
    if adapter is None:
        return "the session's protocol is not one ember speaks"
    if model is None:
        return "no model recorded for the session's own thread: nothing to re-read with"
    if not credentials:
        return (
            "no credentials: the session's own are no longer held in memory (they are kept "
            "for the provider's cache TTL only)"
        )
    return None


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000
