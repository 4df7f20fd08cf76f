"""The shadow stage: the proxy side of shadow memory (``EMBER_SHADOW``).

On the session's own thread only (never a title request or a sub-agent: the shadow forks only
from the conversation the user is having), it hands each request and answer to the shared
machinery (``ember.shadow.observe``, which library mode uses too):
- a new request cancels the session's shadow work at once;
- every answer is recorded in the transcript (the kernel's ``Services.transcripts``, once per
  exchange for every feature that reads it); the stage notes the prefix (the exact bytes
  sent, the answer, the credentials, in memory for the cache TTL) and fires the triggers.
Fail open: whatever goes wrong here is logged and the user's request is untouched.
"""

from __future__ import annotations

from ember.config import Settings
from ember.exchange import Exchange, Outcome, Services, Stage, Stopping
from ember.facts import MemoryOpener
from ember.prices import PriceTable
from ember.shadow.observe import Answered, ShadowCore, forwarded
from ember.shadow.service import ShadowService
from ember.shadow.settings import ShadowSettings
from ember.shadow.steward import Steward
from ember.transcript_recorder import Transcripts

__all__ = ["MemoryOpener", "ShadowStage", "forwarded"]


class ShadowStage(Stage):
    name = "shadow"
    #: right after accounting's: it records the transcript (``Transcripts.of_exchange``), and
    #: a recording queued only after the other stages' work on the answer was lost to a kill
    response_order = -1

    def __init__(self, settings: Settings, memories: MemoryOpener | None = None) -> None:
        self.settings = settings
        self.memories = memories
        self.core: ShadowCore | None = None
        self.transcripts: Transcripts | None = None

    async def start(self, services: Services) -> None:
        if self.settings.section(ShadowSettings).shadow == "off":
            return
        self.transcripts = services.transcripts
        self.core = ShadowCore(
            self.settings,
            services.storage,
            services.upstream,
            services.url_for,
            services.sessions,
            services.tasks,
            services.transcripts,
            self.memories,
            services.metrics,
        )
        self.core.start()

    @property
    def service(self) -> ShadowService | None:
        return self.core.service if self.core is not None else None

    @property
    def steward(self) -> Steward | None:
        return self.core.steward if self.core is not None else None

    @property
    def prices(self) -> PriceTable:
        return self.settings.price_table()

    async def on_request(self, ex: Exchange) -> None:
        """Any new request of the session's own thread (a user message, or the agent going
        on) makes the recorded prefix stale: queued and running shadow work is cancelled."""
        if self.core is None or self.transcripts is None:
            return
        if ex.is_main_thread and ex.project is not None:
            self.transcripts.begin_exchange(ex)
            self.core.cancel(ex.session_id, ex.project, ex.adapter.name)

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        if self.core is None or self.transcripts is None:
            return
        if not self.transcripts.records(ex) or ex.project is None:
            return  # not a turn of the user's conversation (``Transcripts.records``)
        recorded = await self.transcripts.of_exchange(ex, outcome)
        body = outcome.conversation(ex)
        await self.core.noted(
            Answered(
                session_id=ex.session_id,
                project=ex.project,
                adapter=ex.adapter,
                path=ex.path,
                query=ex.query,
                headers=forwarded(ex.headers),
                body=body,
                sent=outcome.sent,
                answer=outcome.message,
                kind=outcome.kind,
                seq=self.transcripts.begin_exchange(ex),
            ),
            recorded,
        )

    async def wind_down(self, stopping: Stopping) -> None:
        """Stopping is not forgetting: sessions with unread messages are read now, hot, for
        a few seconds at most; what does not finish stays unread for a later run."""
        if self.core is not None:
            await self.core.service.flush(stopping.seconds, stopping.skipped, stopping.reading)

    async def close(self) -> None:
        if self.core is not None:
            self.core.close()
