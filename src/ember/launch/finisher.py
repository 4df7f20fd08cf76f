"""The proxy's side of the hand-over (``ember.launch.finish``): finish the reads, then stop.

``ember proxy`` installs it before it serves. On ``finish.SIGNAL`` (the last ``ember wrap``
using the proxy exited) the proxy keeps serving and has its stages finish their work now —
shadow memory reads the sessions with unread messages while the provider's cache is hot — for
up to ``shadow_finish_seconds``; the asks are answered as soon as the stages say how many
sessions that is. When the work is done, or the bound passed (a run still going is cancelled,
what its call cost is recorded), the proxy stops by itself if a wrap started it and no wrap
uses it by then (``SharedProxy.retire``); otherwise it stays, and the next wrap out asks again.

A stop by a signal (SIGTERM, Ctrl-C) meanwhile takes over: the proxy's own stop path gives
the reads ``shadow_stop_seconds`` more, as it always does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ember.clients.address import ProxyAddress
from ember.config import Settings
from ember.exchange import Stopping
from ember.launch import finish
from ember.launch.shared import SharedProxy

if TYPE_CHECKING:
    import uvicorn

    from ember.proxy.app import ProxyApp

log = logging.getLogger(__name__)

#: How long answered exchanges' response stages may take before the reads start (as long as
#: a stopping proxy gives them).
_RESPONSE_STAGES_SECONDS = 30.0


class Finisher:
    def __init__(self, app: ProxyApp, settings: Settings) -> None:
        self.app = app
        self.seconds = settings.shadow_finish_seconds
        self.run_dir = settings.home / "run"
        self.port = settings.port
        address = ProxyAddress.for_listener(settings.host, settings.port)
        self.shared = SharedProxy(self.run_dir, settings.host, address)
        self.server: uvicorn.Server | None = None
        self._active = 0  #: finishes going on (each ask starts one)
        self._reading = 0  #: sessions the latest of them said it reads
        self._tasks: set[asyncio.Task[None]] = set()
        #: the wraps' lock, held from the decision to stop until the process ends
        self.held: IO[bytes] | None = None

    def install(self, server: uvicorn.Server) -> None:
        """Handle ``finish.SIGNAL``; call on the serving loop before the server starts."""
        self.server = server
        loop = asyncio.get_running_loop()
        signal.signal(finish.SIGNAL, lambda _sig, _frame: loop.call_soon_threadsafe(self.asked))

    def asked(self) -> None:
        """A wrap asked (the signal's handler, on the loop): answer it and finish."""
        task = asyncio.get_running_loop().create_task(
            self.run(finish.pending(self.run_dir, self.port))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self, asks: list[Path]) -> None:
        answered = False

        def reading(sessions: int) -> None:
            nonlocal answered
            self._reading = sessions
            if sessions > 0 and not answered:
                answered = True
                finish.answer(asks, finish.Answer("finishing", sessions, self.seconds))

        log.info(
            "wrap: the last ember wrap using this proxy exited; finishing its work (up to %g s)",
            self.seconds,
        )
        self._active += 1
        try:
            # the client's last answer may still be going through the response stages (which
            # note the session for the read): the client had it before they ran
            await self.app.flow.wait(timeout=_RESPONSE_STAGES_SECONDS)
            await self.app.pipeline.wind_down(Stopping(self.seconds, self._skipped, reading))
        finally:
            self._active -= 1
        if self._active:  # an earlier ask's reads go on: that one decides
            if not answered:
                finish.answer(asks, finish.Answer("finishing", self._reading, self.seconds))
            return
        self._reading = 0
        await self._retire(asks if not answered else [])

    async def _retire(self, asks: list[Path]) -> None:
        """Stop when no wrap uses the proxy (answering ``asks`` with what happens)."""
        held = None
        if not self._stopping():
            held = await asyncio.to_thread(self.shared.retire, os.getpid(), self._stopping)
        stops = held is not None or self._stopping()
        finish.answer(asks, finish.Answer("stopping" if stops else "staying"))
        if held is None:
            if not stops:
                log.info("wrap: an ember wrap uses this proxy (or it is your own): it stays")
            return
        self.held = held
        log.info("wrap: no ember wrap uses this proxy any more: it stops")
        if self.server is not None:
            self.server.should_exit = True

    def _stopping(self) -> bool:
        return self.server is not None and bool(self.server.should_exit)

    def _skipped(self) -> bool:
        """A second Ctrl-C (the proxy's own stop path) cuts the reads at once."""
        return self.server is not None and bool(self.server.force_exit)
