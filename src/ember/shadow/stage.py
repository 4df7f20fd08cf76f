"""The shadow stage: the proxy side of shadow memory (``EMBER_SHADOW``).

On the session's own thread only (never a title request or a sub-agent: the shadow forks only
from the conversation the user is having):
- a new user ask cancels the session's shadow work at once;
- every answer records the transcript (the request's new messages and the answer), notes the
  prefix (the exact bytes sent, the answer, the credentials, in memory for the cache TTL) and
  fires the triggers: a finished turn, a failed one, a restarted history.
Fail open: whatever goes wrong here is logged and the user's request is untouched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ember.config import Settings
from ember.exchange import Exchange, Outcome, Services, Stage
from ember.memory.core import HierarchicalMemory
from ember.prices import PriceTable
from ember.project import ProjectRef
from ember.protocols.transcript import answer_items, transcript_items
from ember.shadow import cursors, runs
from ember.shadow.models import FactIn
from ember.shadow.policy import turn_ended
from ember.shadow.prefix import Prefix, PrefixBook
from ember.shadow.runner import RunRecord, RunRequest, ShadowRunner, memories_for_promotion
from ember.shadow.service import SessionShadow, ShadowService
from ember.shadow.steward import Steward
from ember.shadow.transcript import (
    Lineage,
    insert_rows,
    latest_generation,
    place,
    position_digests,
    rows_for,
)
from ember.store.database import Database
from ember.store.driver import Connection

log = logging.getLogger(__name__)

MemoryOpener = Callable[[ProjectRef], HierarchicalMemory | None]


class ShadowStage(Stage):
    name = "shadow"

    def __init__(self, settings: Settings, memories: MemoryOpener | None = None) -> None:
        self.settings = settings
        self.memories = memories
        self.service: ShadowService | None = None
        self.steward: Steward | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._started: set[Path] = set()

    async def start(self, services: Services) -> None:
        if self.settings.shadow == "off" or services.upstream is None:
            return
        assert services.sessions is not None and services.url_for is not None
        runner = ShadowRunner(
            self.settings,
            services.storage,
            services.upstream,
            services.url_for,
            PrefixBook(),
            self.settings.price_table(),
            self._promote if self.memories is not None else None,
        )
        if self.settings.shadow == "compare":
            self.steward = Steward(
                services.storage,
                services.upstream,
                services.url_for,
                self.settings.price_table(),
                promote=self._promote if self.memories is not None else None,
            )
        self.service = ShadowService(
            runner,
            services.sessions,
            services.tasks,
            idle_seconds=self.settings.shadow_idle_seconds,
            tick_seconds=self.settings.shadow_tick_seconds,
            after_run=self._steward_after if self.steward is not None else None,
        )
        self._ticker = services.tasks.spawn(self.service.tick_forever(), name="shadow-tick")

    @property
    def prices(self) -> PriceTable:
        return self.settings.price_table()

    # -- the request path ------------------------------------------------------------------

    async def on_request(self, ex: Exchange) -> None:
        """Any new request of the session's own thread (a user message, or the agent going
        on) makes the recorded prefix stale and means the session is active again: queued
        and running shadow work is cancelled at once."""
        if self.service is not None and ex.is_main_thread and ex.project is not None:
            self.service.cancel(ex.session_id)
            st = self.service.attach(ex.session_id, ex.project, ex.adapter.name)
            st.issued += 1
            ex.state[self.name] = st.issued

    # -- the response path -----------------------------------------------------------------

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        service = self.service
        if service is None or not ex.is_main_thread or ex.project is None:
            return
        st = service.attach(ex.session_id, ex.project, ex.adapter.name)
        async with st.recording:
            await self._handle_answer(service, ex, outcome, st)
        service.kick(ex.session_id)

    async def _handle_answer(
        self, service: ShadowService, ex: Exchange, outcome: Outcome, st: SessionShadow
    ) -> None:
        seq = ex.state.get(self.name, 0)
        if seq and seq <= st.recorded_seq:
            # A later request of the thread was handled first (answers are processed after the
            # client has them, concurrently): its history holds this one, and recording this
            # older one now would look like a restarted history and note a stale prefix.
            return
        st.recorded_seq = max(st.recorded_seq, seq)
        # The client had this answer and the thread's next request already arrived (and
        # cancelled the session's shadow work): this turn's end must not queue a run now, or
        # it would fork the session in the middle of that next turn. Its own end triggers.
        overtaken = bool(seq) and seq < st.issued
        ended = await self._record(ex, outcome, st)
        if outcome.kind == "ok" and outcome.message is not None and outcome.sent:
            service.runner.prefixes.note(self._prefix(ex, outcome, st))
        if ended is not None:
            service.trigger(ex.session_id, "generation-ended", generation=ended)
        elif overtaken:
            pass
        elif outcome.kind in ("ok",) and turn_ended(outcome.message):
            service.trigger(ex.session_id, "turn-ended")
        elif outcome.kind not in ("ok", "cancelled"):
            service.trigger(ex.session_id, "turn-failed")

    async def _record(self, ex: Exchange, outcome: Outcome, st: SessionShadow) -> int | None:
        """Write the request's new messages and the answer; returns the generation that just
        ended, when this request started a new one."""
        db = self._database(ex.project)
        if db.path not in self._started:
            # First touch of this project by this process: runs a dead process left open are
            # closed, and the activation watermark is set before the first message is
            # recorded (history from before shadow memory was enabled is never read).
            self._started.add(db.path)
            await db.awrite(_first_touch, label="shadow")
        items = transcript_items(ex.adapter, ex.body)
        digests = position_digests(items)
        latest = 0
        if st.lineage is None:
            latest = await db.aread(lambda c: latest_generation(c, ex.session_id))
        offset = _continuation_offset(ex, st.lineage)
        if offset and st.lineage is not None:  # only the new items came: after what is recorded
            items = [dataclasses.replace(i, position=i.position + offset) for i in items]
            generation, start = st.lineage.generation, offset
        else:
            generation, start = place(st.lineage, digests, latest)
        ended = (
            st.lineage.generation if st.lineage and generation != st.lineage.generation else None
        )
        count = ex.adapter.message_count(ex.body)
        answer = answer_items(ex.adapter, outcome.message, count) if outcome.message else []
        rows = rows_for(ex.session_id, generation, [*items, *answer], start)
        if rows:
            await db.awrite(lambda c: insert_rows(c, rows), label="transcript")
        if offset and st.lineage is not None:
            count += offset
            st.lineage.recorded = max([count, *(a.position + 1 for a in answer)])
            return None
        st.lineage = Lineage(
            generation,
            digests[0] if digests else "",
            len(digests),
            digests[-1] if digests else "",
            max([count, *(a.position + 1 for a in answer)]),
        )
        return ended

    def _prefix(self, ex: Exchange, outcome: Outcome, st: SessionShadow) -> Prefix:
        assert outcome.message is not None and st.lineage is not None
        usage = outcome.message.usage
        return Prefix(
            session_id=ex.session_id,
            project_key=str(self._database(ex.project).path),
            generation=st.lineage.generation,
            adapter=ex.adapter,
            path=ex.path,
            query=ex.query,
            headers=forwarded(ex.headers),
            sent=outcome.sent,
            answer=outcome.message,
            recorded_at=time.monotonic(),
            ttl=ex.adapter.cache_ttl(ex.body),
            input_tokens=usage.total_input_tokens if usage is not None else 0,
        )

    def _database(self, project: ProjectRef | None) -> Database:
        assert project is not None and self.service is not None
        return self.service.runner.database(project)

    # -- promotion -------------------------------------------------------------------------

    async def _promote(
        self, project: ProjectRef, session_id: str, facts: Sequence[tuple[str, FactIn]]
    ) -> Mapping[str, str]:
        """Validated facts become project-wide memories, with their evidence; returns the
        memory id of each proposal (the shadow's in mode primary, the steward's in compare)."""
        if self.memories is None or not facts:
            return {}
        store = await asyncio.to_thread(self.memories, project)
        if store is None:
            return {}
        items = memories_for_promotion(facts, session_id)
        saved = await asyncio.to_thread(store.add_many, items)
        return {pid: m.id for (pid, _), m in zip(facts, saved, strict=True)}

    async def _steward_after(self, req: RunRequest, record: RunRecord) -> None:
        """Mode compare: the cold steward reads the very window the shadow just read."""
        if self.steward is None or self.service is None:
            return
        runner = self.service.runner
        prefix = runner.prefixes.get(req.session_id)
        family = (req.protocol or "anthropic").split("_")[0]
        creds = prefix.credentials() if prefix is not None else None
        creds = creds or runner.prefixes.credentials(str(runner.database(req.project).path), family)
        await self.steward.run(
            req.session_id,
            req.generation,
            req.project,
            req.protocol or "anthropic",
            creds,
            through_seq=record.through_seq,
        )

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()


def _first_touch(conn: Connection) -> None:
    runs.close_interrupted(conn)
    cursors.activate(conn)


def _continuation_offset(ex: Exchange, lineage: Lineage | None) -> int:
    """A Responses request that continues a stored response (``previous_response_id``, as
    Codex does over WebSocket) sends only its new items: they follow what is recorded."""
    body = ex.body
    cont = isinstance(body, dict) and bool(body.get("previous_response_id"))
    return lineage.recorded if cont and lineage is not None else 0


def forwarded(headers: dict[str, str]) -> list[tuple[str, str]]:
    """The client's headers as the proxy forwards them (no hop-by-hop, no ``x-ember-*``)."""
    skip = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}
    return [(k, v) for k, v in headers.items() if k not in skip and not k.startswith("x-ember-")]
