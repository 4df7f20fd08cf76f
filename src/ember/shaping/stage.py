"""The shaping stage: wires the pure policies to the proxy's traffic.

On each request: classify the turn by structure, pick the session's arm (holdout by hash),
observe the user signal a new ask carries, then -- treatment arm only -- put the verbosity
block at the system tail and lower effort fields on a mechanical continuation. The control
arm is classified and recorded but forwarded byte-for-byte as the client sent it.

On each answer: remember what came back (for the next request's signal and the cache guard),
and record output tokens and echo for the savings ledger, flushed every 25 outcomes.

Cache invariants enforced here (each prevents a full-price re-write of the session's prefix):
- the block's level is fixed per session and changes only at a session boundary or once the
  session has been idle past its cache TTL (5 min, 1 h with ``ttl: "1h"``), so a warm
  prefix never sees a different block;
- the legacy thinking budget is clamped only with ``EMBER_OUTPUT_THINKING_CLAMP`` on, and then
  starts only when the cache is known to be cold and is held only across consecutive
  mechanical turns (``policy.budget_clamp_allowed`` has the measurements);
- effort routing stops for a model as soon as a change of effort evidently cost a cache
  read (``policy.params_broke_cache``).
Per-session state lives in the proxy's session registry (``sessions.SessionBook``); a failure
anywhere here is rolled back by the pipeline and the request goes on unshaped (fail open).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ember.config import Settings
from ember.errors import StorageError, StorageUnavailable
from ember.exchange import Exchange, Outcome, Services, Stage
from ember.protocols.base import AssembledMessage
from ember.shaping.apply import apply_effort, apply_verbosity
from ember.shaping.controller import MAX_AUTO_LEVEL, ControllerState, Signal, observe
from ember.shaping.echo import ECHO_NGRAM, context_text, echo_ratio
from ember.shaping.levels import ResolvedLevel, resolve_level
from ember.shaping.policy import (
    TurnKind,
    budget_clamp_allowed,
    classify_turn,
    params_broke_cache,
    plan_effort,
)
from ember.shaping.recorder import MIN_FLUSH_INTERVAL, SavingsRecorder
from ember.shaping.sessions import DEFAULT_CAPACITY, RequestNote, SessionBook, SessionState
from ember.shaping.settings import ShapingSettings
from ember.shaping.signals import PreviousAnswer, detect_signal
from ember.shaping.state import ShapingState, load_controller, save_controller
from ember.store.database import Database
from ember.store.registry import Storage, stats_where
from ember.strata import assign_arm, stratum_key

log = logging.getLogger(__name__)

ECHO_PER_SECOND = 5.0

ArmOrOff = Literal["treatment", "control", "off"]
Params = tuple[str | None, str | None]


@dataclass
class ShapingNote:
    """What shaping did to one exchange (``Exchange.state["shaping"]``); no content."""

    arm: ArmOrOff
    kind: TurnKind
    stratum: str
    seq: int
    level: int | None = None
    source: str | None = None
    block_edited: bool = False
    effort_changes: tuple[str, ...] = ()
    signal: Signal | None = None


def _echo(answer: str, body: Any) -> float | None:
    if len(answer.split(maxsplit=ECHO_NGRAM)) < ECHO_NGRAM:
        return None  # too short to measure: skip walking the whole request
    return echo_ratio(answer, context_text(body))


class ShapingStage(Stage):
    name = "shaping"

    def __init__(
        self,
        settings: Settings,
        *,
        storage: Storage | None = None,
        clock: Callable[[], float] = time.monotonic,
        recorder: SavingsRecorder | None = None,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self.settings = settings
        self.options: ShapingSettings = settings.section(ShapingSettings)
        self.clock = clock
        #: the home's stats.db holds shaping's state; until the app hands its storage over
        #: (``start``), what is read comes from the files of before (if any)
        self.storage = storage
        self.state = ShapingState(
            settings.home, self._stats, kept_in=stats_where(settings.home, settings.store_url)
        )
        self.recorder = recorder or SavingsRecorder(self.state)
        self.sessions = SessionBook(capacity=capacity)
        self.controller: ControllerState | None = None
        #: what is stored was read (False while the store could not be reached: read again
        #: at each periodic flush until it is)
        self._loaded = self.recorder.loaded
        if self.options.output_autotune:
            try:
                self.controller = load_controller(self.state)
            except StorageUnavailable:
                self._loaded = False
        self._controller_dirty = False
        #: models for which an effort change was seen to cost the cache (routing stopped)
        self.effort_disabled: set[str] = set()
        self._last_echo = float("-inf")
        self._flusher: asyncio.Task[None] | None = None
        self._write_failed = _Incident()

    def _stats(self) -> Database | None:
        return self.storage.stats() if self.storage is not None else None

    async def start(self, services: Services) -> None:
        self.sessions = SessionBook(services.sessions)  # share the proxy's book of sessions
        if self.storage is None:
            self.storage = services.storage
            await asyncio.to_thread(self._load)
        self._flusher = asyncio.create_task(self._flush_periodically(), name="shaping-flush")

    async def _flush_periodically(self) -> None:
        """Write what was recorded every few seconds, however few outcomes: without it the
        report showed 25 of 100 outcomes until shutdown, and a crash lost the rest. The
        controller's state is saved here too, never per answer: an fsync'd file write on
        every response was a tenth of the proxy's busy time under load."""
        while True:
            await asyncio.sleep(MIN_FLUSH_INTERVAL)
            if not self._loaded:
                await asyncio.to_thread(self._load)
            if self.recorder.pending:
                await self._flush()
            await self._save_controller()

    # -- request path -------------------------------------------------------------------

    async def on_request(self, ex: Exchange) -> None:
        if not ex.is_main_thread:
            return  # a title request or a sub-agent: forwarded as sent, not in the savings
        now = self.clock()
        body = ex.doc.value
        kind = classify_turn(ex.adapter.turn_parts(body))
        arm = self._arm(ex.session_id)
        stratum = stratum_key(kind, len(ex.doc.raw), ex.model, ex.adapter.has_tools(body))
        state = self.sessions.get(ex.session_id)
        known_cold = state is not None and state.is_cold(now)
        if state is None:
            resolved = self.resolve_level()
            state = SessionState(resolved.level, resolved.source, now, 0.0)
            self.sessions.put(ex.session_id, state)
        seq = state.seq + 1
        note = ShapingNote(arm, kind, stratum, seq)
        params: Params = (None, None)
        changed: tuple[str, ...] = ()
        if arm == "treatment":
            note.signal = self._observe(ex, state, kind, seq, now)
            if known_cold:
                resolved = self.resolve_level()
                state.level, state.source = resolved.level, resolved.source
            note.level, note.source = state.level, state.source
            note.block_edited = apply_verbosity(
                ex.adapter, ex.doc, state.level, inherits_system=not ex.inherits_no_system
            )
            params, changed = self._route_effort(ex, state, kind, known_cold)
            note.effort_changes = changed
        state.add_note(RequestNote(seq, now, params, bool(changed)))
        # the longest TTL seen: a 1-hour breakpoint written earlier may no longer be in view
        ttl = ex.adapter.cache_ttl(body)
        state.ttl = ttl if known_cold else max(state.ttl, ttl)
        state.seq, state.last_seen = seq, now
        ex.state[self.name] = note
        if arm != "off":
            ex.notes[self.name] = {
                "arm": arm,
                "level": note.level,
                "block": note.block_edited,
                "effort": list(changed),
            }

    def _arm(self, session_id: str) -> ArmOrOff:
        if not self.options.output_shaping:
            return "off"
        return assign_arm(session_id, self.options.output_holdout)

    def resolve_level(self) -> ResolvedLevel:
        """env > controller > learned level (``verbosity``) > default 2, with its source."""
        controller = self.controller.level if self.controller is not None else None
        return resolve_level(self.options.verbosity_level, controller, self.recorder.learned_level)

    def _observe(
        self, ex: Exchange, state: SessionState, kind: TurnKind, seq: int, now: float
    ) -> Signal | None:
        """Feed the controller the signal this request carries (a new ask only)."""
        autotune = self.options.output_autotune and self.options.verbosity_level is None
        previous = state.notes.get(seq - 1)
        if not autotune or kind != TurnKind.NEW_ASK or previous is None:
            return None
        index = ex.adapter.latest_user_index(ex.doc.value)
        text = ex.adapter.user_text(ex.doc.value, index) if index is not None else ""
        signal = detect_signal(previous.answer, kind, text, now)
        if signal is None:
            return None
        if self.controller is None:
            fallback = resolve_level(None, None, self.recorder.learned_level).level
            self.controller = ControllerState(min(fallback, MAX_AUTO_LEVEL))
        before = self.controller.level
        self.controller = observe(self.controller, signal)
        self._controller_dirty = True
        if self.controller.level != before:
            log.info(
                "verbosity controller: level %d -> %d after %s (new sessions, and idle ones "
                "whose cache has expired, get it)",
                before,
                self.controller.level,
                signal.value,
            )
        return signal

    def _route_effort(
        self, ex: Exchange, state: SessionState, kind: TurnKind, known_cold: bool
    ) -> tuple[Params, tuple[str, ...]]:
        fields = ex.adapter.effort_fields(ex.doc.value)
        sent: Params = (fields.effort, fields.verbosity)
        model = ex.model
        if not self.options.output_effort_routing or (model or "") in self.effort_disabled:
            state.budget_held = False
            return sent, ()
        plan = plan_effort(
            kind,
            fields,
            protocol=ex.adapter.name,
            model=model,
            target=self.options.output_mechanical_effort,
            clamp_budget=self.options.output_thinking_clamp
            and budget_clamp_allowed(kind, known_cold, state.budget_held),
        )
        changed = () if plan.empty else apply_effort(ex.adapter, ex.doc, plan)
        state.budget_held = "thinking_budget" in changed
        effort = plan.effort if "effort" in changed else fields.effort
        verbosity = plan.verbosity if "verbosity" in changed else fields.verbosity
        return (effort, verbosity), changed

    # -- response path ------------------------------------------------------------------

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        note = ex.state.get(self.name)
        if not isinstance(note, ShapingNote):
            return
        state = self.sessions.peek(ex.session_id)
        if state is not None:
            self._remember(ex, state, note.seq, outcome)
        msg = outcome.message
        if outcome.kind == "ok" and msg is not None and msg.usage is not None:
            await self._record(ex, note, msg)

    def _remember(self, ex: Exchange, state: SessionState, seq: int, outcome: Outcome) -> None:
        req = state.notes.get(seq)
        if req is None:
            return
        msg = outcome.message
        handed_back = (
            outcome.kind == "ok" and msg is not None and msg.complete and not msg.tool_calls
        )
        first_ms = outcome.ttfb_ms if outcome.streamed and outcome.ttfb_ms else outcome.latency_ms
        visible = len(msg.text) if msg is not None else 0
        req.answer = PreviousAnswer(
            outcome.kind, handed_back, visible, req.started_at + first_ms / 1000
        )
        if outcome.kind == "ok" and msg is not None and msg.usage is not None:
            req.usage_known = True
            req.cache_read, req.cache_write = (
                msg.usage.cache_read_tokens,
                msg.usage.cache_write_tokens,
            )
        for before, after in ((state.notes.get(seq - 1), req), (req, state.notes.get(seq + 1))):
            if before is not None and after is not None:
                self._guard(ex, state, before, after)

    def _guard(
        self, ex: Exchange, state: SessionState, prev: RequestNote, cur: RequestNote
    ) -> None:
        if not (prev.usage_known and cur.usage_known):
            return  # a failed or cut request read nothing: no evidence either way
        changed = prev.params != cur.params and (
            prev.ember_changed_params or cur.ember_changed_params
        )
        within = cur.started_at - prev.started_at <= state.ttl
        cached = prev.cache_read + prev.cache_write
        model = ex.model or ""
        if model not in self.effort_disabled and params_broke_cache(
            cached, cur.cache_read, changed, within
        ):
            self.effort_disabled.add(model)
            log.warning(
                "effort routing stopped for %s: changing effort parameters cost a cache read "
                "(%d of %d tokens read); requests of this model keep their effort as sent",
                model,
                cur.cache_read,
                cached,
            )

    async def _record(self, ex: Exchange, note: ShapingNote, msg: AssembledMessage) -> None:
        assert msg.usage is not None
        output = msg.usage.output_tokens
        if note.arm == "off":
            due = self.recorder.record_baseline(note.stratum, output)
        else:
            text = msg.text
            echo = None
            if text and self._echo_due():
                echo = await asyncio.to_thread(_echo, text, ex.doc.value)
            due = self.recorder.record(note.arm, note.stratum, output, echo)
        if due:
            await self._flush()

    def _echo_due(self) -> bool:
        """Echo is measured on at most ``ECHO_PER_SECOND`` answers a second: it walks the
        request's recent text, and under heavy traffic a sample (taken by time, so unrelated
        to content and unbiased) gives the same mean for a fraction of the CPU."""
        now = self.clock()
        if now - self._last_echo < 1.0 / ECHO_PER_SECOND:
            return False
        self._last_echo = now
        return True

    async def settle(self) -> None:
        """Write what is held for the periodic flush now (``ProxyApp.drain``: tests, the
        demo)."""
        if self.recorder.pending:
            await self._flush()
        await self._save_controller()

    def _load(self) -> None:
        """What is stored, now that the database is there (``_loaded`` False while the
        store cannot be reached)."""
        self._loaded = self.recorder.reload()
        if self.options.output_autotune and self.controller is None:
            try:
                self.controller = load_controller(self.state)
            except StorageUnavailable:
                self._loaded = False

    async def _flush(self) -> None:
        try:
            await asyncio.to_thread(self.recorder.flush)
        except (OSError, StorageError) as exc:
            self._write_failed.fail(exc)
        else:
            self._write_failed.clear()

    async def _save_controller(self) -> None:
        if not self._controller_dirty or self.controller is None:
            return
        self._controller_dirty = False
        try:
            await asyncio.to_thread(save_controller, self.state, self.controller)
        except (OSError, StorageError) as exc:
            self._controller_dirty = True  # tried again at the next periodic flush
            self._write_failed.fail(exc)
        else:
            self._write_failed.clear()

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self._flush()
        await self._save_controller()
        self._count_unwritten()

    def _count_unwritten(self) -> None:
        """At the stop: what the last flush could not write is lost, and counted as such (by
        the database's health) — once, never per failed flush before it."""
        outcomes, controller = self.recorder.unwritten, int(self._controller_dirty)
        if not outcomes + controller:
            return
        log.error(
            "shaping: %d savings outcomes%s could not be written before the stop (%s); "
            "they are lost and counted in `ember stats`",
            outcomes,
            " and the verbosity controller's state" if controller else "",
            self._write_failed.cause or "the database is off",
        )
        with contextlib.suppress(Exception):
            self.state.lost(outcomes + controller)


class _Incident:
    """Writes of shaping's state that keep failing: said once when they start failing and
    once when a write goes through again, never at every retry (every 2 s)."""

    def __init__(self) -> None:
        self.cause: str | None = None

    def fail(self, exc: BaseException) -> None:
        if self.cause is None:
            # a store switched off said so itself, once: this line is its detail
            level = logging.INFO if isinstance(exc, StorageUnavailable) else logging.WARNING
            log.log(
                level,
                "shaping: could not write the savings ledger (%s); outcomes are kept in memory "
                "and written when the database takes writes again (said once)",
                exc,
            )
        self.cause = str(exc)

    def clear(self) -> None:
        if self.cause is not None:
            log.info("shaping: the savings ledger is written again")
        self.cause = None
