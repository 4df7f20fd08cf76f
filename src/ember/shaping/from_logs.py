"""``ember learn --verbosity``: a verbosity level and an output baseline from agents' own logs.

Users rarely say "shorter"; they interrupt an answer, or reply sooner than it could have been
read. Both are counted per new ask (a user message after an answer that handed the turn back)
with the proxy's own detectors (``ember.shaping.signals``), so the offline and the live
controller agree on what a fast skip is:

- **interrupt**: the log marks the user message as an interruption of the answer before it;
- **fast skip**: the answer was complete, long enough not to be taken in at a glance, and the
  next message came before even a skim could finish (timed from the answer's first message);
- **asked for more**: a short "explain more"-style follow-up, which pulls the level down.

The recommended level follows the combined pressure (``interrupt rate + fast-skip rate``) and
is never above 3: level 4 is for users who ask for it, a log cannot prove they want fragments.
Too few observations give no level at all rather than a guess.

The **baseline** is what unshaped answers cost, per stratum (``ember.strata``: turn
kind, input bucket, model family, tools), the counterfactual ``ember output-savings`` measures
shaped answers against. Only answers from before shaping first answered a request count: a
baseline made of shaped answers would make every saving look like zero.

``ember learn`` reads the logs (``ember.learn.logs``) and hands the sessions to ``verbosity_of``;
this module knows them only through the protocols below, so neither feature imports the other.

It is written into shaping's ``verbosity`` document (``state.ShapingState``, in ``stats.db``)
in one write transaction. Its baseline also holds what the proxy recorded while shaping was
off, so this run's contribution is kept apart (``learned.baseline``) and swapped, not added:
learning twice from the same logs leaves the baseline as it was.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ember.shaping.policy import TurnKind, classify_turn
from ember.shaping.savings import Ledger, Strata, strata_from_json, strata_to_json
from ember.shaping.signals import PreviousAnswer, asks_for_more, fast_skip
from ember.shaping.state import ShapingState
from ember.stats import RunningStats
from ember.strata import BYTES_PER_TOKEN, stratum_key

log = logging.getLogger(__name__)

#: The highest level learning may recommend (level 4 only when asked for explicitly).
MAX_LEARNED_LEVEL = 3
#: New asks needed before a level is recommended at all.
MIN_OBSERVATIONS = 20
#: Combined pressure (interrupt + fast-skip rate) at which each level starts.
PRESSURE_LEVELS: tuple[tuple[float, int], ...] = ((0.30, 3), (0.10, 2), (0.0, 1))
#: A share of "tell me more" follow-ups at which answers are taken to be too thin already.
TOO_LITTLE_RATE = 0.10


class LogMessage(Protocol):
    """What this module reads of one normalised log message.

    ``role``: ``user`` or ``assistant`` (others are skipped); ``parts``: the kinds of its
    content blocks, named as in ``ember.shaping.policy`` (``text``, ``image``, ``tool_use``,
    ``tool_result``, ``tool_error``...); ``text``: its visible text, or a snippet of it (enough
    to recognise "explain more"); ``chars``: the length of the whole visible text (how long an
    answer was, which a reader need not hold to count); ``interrupted``: this user
    message records that the user stopped the answer before it (Claude Code's "[Request
    interrupted by user]", Codex's ``turn_aborted``); ``output_tokens`` / ``input_tokens``: the
    API usage of an assistant message (input including cached tokens), None when unknown.
    One assistant message is one API answer (a message split over several log lines is one).
    """

    @property
    def role(self) -> str: ...
    @property
    def timestamp(self) -> float | None: ...
    @property
    def parts(self) -> Sequence[str]: ...
    @property
    def text(self) -> str: ...
    @property
    def chars(self) -> int: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def model(self) -> str | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def input_tokens(self) -> int | None: ...


class LogSession(Protocol):
    @property
    def messages(self) -> Sequence[LogMessage]: ...


@dataclass
class SignalCounts:
    new_asks: int = 0
    interrupts: int = 0
    fast_skips: int = 0
    asked_for_more: int = 0

    def rate(self, n: int) -> float:
        return n / self.new_asks if self.new_asks else 0.0

    @property
    def pressure(self) -> float:
        return self.rate(self.interrupts) + self.rate(self.fast_skips)


@dataclass
class VerbosityReport:
    """What the logs say: the signals, the level they point to (None: too little evidence),
    and the baseline strata of answers from before ``shaped_since``."""

    signals: SignalCounts = field(default_factory=SignalCounts)
    sessions: int = 0
    level: int | None = None
    baseline: Strata = field(default_factory=dict)
    baseline_answers: int = 0
    shaped_since: float | None = None

    def to_json(self) -> dict[str, Any]:
        s = self.signals
        return {
            "level": self.level,
            "sessions": self.sessions,
            "new_asks": s.new_asks,
            "interrupt_rate": s.rate(s.interrupts),
            "fast_skip_rate": s.rate(s.fast_skips),
            "asked_for_more_rate": s.rate(s.asked_for_more),
            "baseline_answers": self.baseline_answers,
            "baseline_strata": len(self.baseline),
            "shaped_since": self.shaped_since,
        }


def recommend_level(signals: SignalCounts) -> int | None:
    """The level the pressure points to, never above ``MAX_LEARNED_LEVEL``; None below
    ``MIN_OBSERVATIONS`` new asks. Many asks for more detail hold it at 1."""
    if signals.new_asks < MIN_OBSERVATIONS:
        return None
    if signals.rate(signals.asked_for_more) >= TOO_LITTLE_RATE:
        return 1
    for floor, level in PRESSURE_LEVELS:
        if signals.pressure >= floor:
            return min(level, MAX_LEARNED_LEVEL)
    return 1


def _turn_kind(parts: Sequence[str]) -> TurnKind:
    return classify_turn([p for p in parts if p != "tool_use"])


def _observe(
    counts: SignalCounts, answer: Sequence[LogMessage], msg: LogMessage, tool_pending: bool
) -> None:
    """One user message after ``answer`` (the assistant's text since the last tool round).

    An interrupt counts whether or not the cut answer reached the log, unless the assistant's
    last word was a tool call (then the user stopped a tool, which says nothing about length).
    """
    if msg.interrupted:
        if not tool_pending:
            counts.new_asks += 1
            counts.interrupts += 1
        return
    if _turn_kind(msg.parts) != TurnKind.NEW_ASK or not answer:
        return
    counts.new_asks += 1
    if asks_for_more(msg.text):
        counts.asked_for_more += 1
        return
    first = answer[0].timestamp
    if first is None or msg.timestamp is None:
        return
    chars = sum(m.chars for m in answer)
    if fast_skip(PreviousAnswer("ok", not tool_pending, chars, first), msg.timestamp):
        counts.fast_skips += 1


def _add_baseline(report: VerbosityReport, kind: TurnKind, msg: LogMessage) -> None:
    if msg.output_tokens is None or msg.input_tokens is None:
        return
    if report.shaped_since is not None and (
        msg.timestamp is None or msg.timestamp >= report.shaped_since
    ):
        return
    # Agents' sessions always offer tools; the request body is about 4 bytes a token.
    key = stratum_key(kind.value, msg.input_tokens * BYTES_PER_TOKEN, msg.model, True)
    report.baseline.setdefault(key, RunningStats()).add(msg.output_tokens)
    report.baseline_answers += 1


def learn_verbosity(
    sessions: Iterable[LogSession], *, shaped_since: float | None = None
) -> VerbosityReport:
    """Signals, level and baseline from ``sessions`` (streamed: one session held at a time).

    ``shaped_since``: answers at or after this time are left out of the baseline (see
    ``shaping_started``); None counts every answer.
    """
    report = VerbosityReport(shaped_since=shaped_since)
    for session in sessions:
        report.sessions += 1
        answer: list[LogMessage] = []
        tool_pending = False
        kind = TurnKind.UNKNOWN
        for msg in session.messages:
            if msg.role == "user":
                _observe(report.signals, answer, msg, tool_pending)
                kind = _turn_kind(msg.parts)
                if kind != TurnKind.UNKNOWN or msg.interrupted:
                    answer, tool_pending = [], False
            elif msg.role == "assistant":
                _add_baseline(report, kind, msg)
                if "tool_use" in msg.parts:
                    answer, tool_pending = [], True
                elif msg.text:
                    answer.append(msg)
                    tool_pending = False
    report.level = recommend_level(report.signals)
    return report


class ReadSession(Protocol):
    """One session as a log reader hands it over (``ember.learn.model.SessionData``)."""

    @property
    def agent(self) -> str: ...
    @property
    def turns(self) -> Sequence[LogMessage]: ...
    @property
    def turns_dropped(self) -> int: ...


@dataclass(frozen=True)
class _Turns:
    messages: Sequence[LogMessage]


@dataclass
class VerbosityRun:
    """The verbosity report, and what the logs could not tell: ``silent`` counts per agent the
    sessions that held no messages (their format logs none ember reads), ``dropped`` the
    messages past a session's cap."""

    report: VerbosityReport
    silent: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


def verbosity_of(sessions: Iterable[ReadSession], shaped_since: float | None) -> VerbosityRun:
    """Fold ``sessions`` (streamed: each is dropped once read) into a verbosity report."""
    silent: Counter[str] = Counter()
    dropped = 0

    def with_messages() -> Iterator[_Turns]:
        nonlocal dropped
        for session in sessions:
            dropped += session.turns_dropped
            if session.turns:
                yield _Turns(session.turns)
            else:
                silent[session.agent] += 1

    report = learn_verbosity(with_messages(), shaped_since=shaped_since)
    return VerbosityRun(report, silent, dropped)


# --- the shaping file ------------------------------------------------------------------------


def _day_start(day: str) -> float | None:
    try:
        return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def shaping_started(state: ShapingState) -> float | None:
    """When shaping first answered a request, as far as its state remembers: the earlier of
    the first shaped day in the savings ledger and the date a previous run recorded (the
    ledger keeps a window of days, so its first day can move later)."""
    found: list[float] = []
    try:
        data = state.read("ledger")
        ledger = Ledger() if data is None else Ledger.from_json(data)
        days = [d for d, b in ledger.days.items() if b.treatment_requests]
        start = _day_start(min(days)) if days else None
        if start is not None:
            found.append(start)
        learned = (state.read("verbosity") or {}).get("learned", {})
        since = learned.get("shaped_since") if isinstance(learned, dict) else None
        if isinstance(since, int | float) and not isinstance(since, bool):
            found.append(float(since))
    except (ValueError, AttributeError) as exc:  # a document of before, not what we write
        log.warning("cannot tell when shaping started: %s", exc)
    return min(found) if found else None


def without(total: RunningStats, part: RunningStats) -> RunningStats:
    """``total`` with ``part`` taken back out (the inverse of ``RunningStats.merged``)."""
    n = total.n - part.n
    if n <= 0 or part.n == 0:
        return RunningStats() if n <= 0 else RunningStats(total.n, total.mean, total.m2)
    mean = (total.n * total.mean - part.n * part.mean) / n
    delta = part.mean - mean
    m2 = total.m2 - part.m2 - delta * delta * n * part.n / total.n
    return RunningStats(n, mean, max(0.0, m2))


def swap_baseline(current: Strata, old: Mapping[str, RunningStats], new: Strata) -> Strata:
    """``current`` with a previous run's strata ``old`` replaced by ``new`` (a stratum whose
    strata did not change is left exactly as it was, free of rounding)."""
    out = dict(current)
    for key, part in old.items():
        if new.get(key) == part:
            continue
        if key in out:
            left = without(out[key], part)
            if left.n:
                out[key] = left
            else:
                del out[key]
    for key, part in new.items():
        if old.get(key) != part:
            out[key] = out[key].merged(part) if key in out else part
    return out


def save_verbosity(state: ShapingState, report: VerbosityReport, now: float | None = None) -> str:
    """Write the level (when there is one) and the baseline into the ``verbosity`` document,
    in one write transaction, keeping every key this module does not own; returns where."""
    where = state.where("verbosity")

    def change(raw: Any) -> dict[str, Any]:
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        prior = data.get("learned")
        learned: dict[str, Any] = prior if isinstance(prior, dict) else {}
        try:
            current = strata_from_json(data.get("baseline", {}))
            old = strata_from_json(learned.get("baseline", {}))
        except ValueError as exc:
            log.warning("%s: baseline unreadable (%s); replaced", where, exc)
            current, old = {}, {}
        out = {**data, "baseline": strata_to_json(swap_baseline(current, old, report.baseline))}
        if report.level is not None:
            out["level"] = report.level
        out["learned"] = {
            **report.to_json(),
            "at": time.time() if now is None else now,
            "baseline": strata_to_json(report.baseline),
        }
        return out

    state.update("verbosity", change)
    return where
