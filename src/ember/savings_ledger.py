"""The savings ledger: what each request saved and spent (``ember.savings``), summed per
request, session, UTC day and project, netted, and said in words where a part is empty.

A tally's net is None as soon as one of its parts holds a request without a price: a net that
left those out would be a smaller number shown as the whole (``priced_usd`` keeps the sum of
what was priced, and ``unpriced_requests`` says how many were not).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.savings import (
    BASIS,
    DAY,
    LABELS,
    SAVED,
    SPENT,
    Entry,
    OutputRates,
    Prices,
    Row,
    entries,
)


@dataclass
class Part:
    """One part of a tally: dollars over the priced entries and how many were not priced."""

    usd: float = 0.0
    unpriced: int = 0
    tokens: float = 0.0
    requests: int = 0
    blocks: int = 0
    rereads: int = 0
    unestimated: int = 0
    low: float | None = None
    high: float | None = None
    labels: set[str] = field(default_factory=set)

    def add(self, e: Entry) -> None:
        self.requests += int(e.counted)
        self.tokens += e.tokens
        self.blocks += int(e.block)
        self.rereads += int(not e.block and e.counted)
        if e.unestimated:
            self.unestimated += 1
            return
        if e.label:
            self.labels.add(e.label)
        if e.usd is None:
            self.unpriced += 1
            return
        self.usd += e.usd
        if e.low is not None and e.high is not None:
            self.low = (self.low or 0.0) + e.low
            self.high = (self.high or 0.0) + e.high

    def merge(self, o: Part) -> None:
        """Add another tally's part of the same name (a week out of its days)."""
        self.usd += o.usd
        self.unpriced += o.unpriced
        self.tokens += o.tokens
        self.requests += o.requests
        self.blocks += o.blocks
        self.rereads += o.rereads
        self.unestimated += o.unestimated
        self.labels |= o.labels
        if o.low is not None and o.high is not None:
            self.low = (self.low or 0.0) + o.low
            self.high = (self.high or 0.0) + o.high

    @property
    def value(self) -> float | None:
        return None if self.unpriced else self.usd

    def to_json(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "usd": None if self.unpriced else round(self.usd, 6),
            "priced_usd": round(self.usd, 6),
            "label": _label(name, self.labels),
            "requests": self.requests,
            "tokens": round(self.tokens),
            "unpriced_requests": self.unpriced,
        }
        if name == "shaping":
            out["low_usd"] = None if self.low is None else round(self.low, 6)
            out["high_usd"] = None if self.high is None else round(self.high, 6)
            out["requests_without_estimate"] = self.unestimated
        if name in ("memory_blocks", "verbosity_block", "tool_definitions"):
            out["blocks_written"] = self.blocks
            out["rereads"] = self.rereads
        return out


def _label(name: str, seen: set[str]) -> str:
    if name != "shaping" or not seen:
        return LABELS[name]
    return "measured" if seen == {"measured"} else "estimated"


@dataclass
class Tally:
    """What was saved and spent over some rows (a request, a session, a day, a project)."""

    #: only the parts something was added to (a tally per request and per day stays small)
    parts: dict[str, Part] = field(default_factory=dict)

    def add(self, e: Entry) -> None:
        part = self.parts.get(e.part)
        if part is None:
            part = self.parts[e.part] = Part()
        part.add(e)

    def part(self, name: str) -> Part:
        return self.parts.get(name) or Part()

    def merge(self, other: Tally) -> None:
        for name, p in other.parts.items():
            mine = self.parts.get(name)
            if mine is None:
                mine = self.parts[name] = Part()
            mine.merge(p)

    def _sum(self, names: Iterable[str]) -> float | None:
        values = [self.part(n).value for n in names]
        return None if any(v is None for v in values) else sum(v for v in values if v)

    @property
    def saved(self) -> float | None:
        return self._sum(SAVED)

    @property
    def spent(self) -> float | None:
        return self._sum(SPENT)

    @property
    def net(self) -> float | None:
        saved, spent = self.saved, self.spent
        return None if saved is None or spent is None else saved - spent

    @property
    def unpriced(self) -> int:
        return sum(p.unpriced for p in self.parts.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "net_usd": _round(self.net),
            "saved_usd": _round(self.saved),
            "spent_usd": _round(self.spent),
        }
        out.update({name: self.part(name).to_json(name) for name in SAVED + SPENT})
        out["unpriced_requests"] = self.unpriced
        return out

    def brief(self) -> dict[str, Any]:
        """Net, saved, spent and each part's dollars (a day, a session, a request)."""
        return {
            "net_usd": _round(self.net),
            "saved_usd": _round(self.saved),
            "spent_usd": _round(self.spent),
            "parts": {n: _round(self.part(n).value) for n in SAVED + SPENT},
        }


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def day_of(ts: float) -> int:
    """A UTC day number (``ts // 86400``), as the dashboard counts days."""
    return int(ts // DAY)


def iso_day(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * DAY))


@dataclass
class Ledger:
    """One project's (or several projects') savings since ``since`` (None: all rows), by UTC
    day and session, and per request when asked for. ``client_requests``: the clients'
    requests in the window (what the empty parts are explained against), ``client_days`` by
    day. ``per_session`` False: no tally per session (the dashboard's overview needs none, and
    on a busy project they were a third of its time)."""

    rates: OutputRates
    since: float | None = None
    total: Tally = field(default_factory=Tally)
    days: dict[int, Tally] = field(default_factory=dict)
    sessions: dict[str, Tally] = field(default_factory=dict)
    requests: dict[int, Tally] = field(default_factory=dict)
    last_seen: dict[str, float] = field(default_factory=dict)
    client_requests: int = 0
    client_days: dict[int, int] = field(default_factory=dict)
    per_session: bool = True

    def add_rows(
        self, rows: Iterable[Row], prices: Prices, *, key: str = "", per_request: bool = False
    ) -> None:
        """Add the parts of ``rows`` (one project's: a session's rows may start before the
        window, so its memory blocks are known; only entries inside it count). ``key``
        prefixes session ids when projects are added together."""
        rows = list(rows)
        since = self.since if self.since is not None else float("-inf")
        for r in rows:
            if r.origin == "client" and r.ts >= since:
                self.client_requests += 1
                d = day_of(r.ts)
                self.client_days[d] = self.client_days.get(d, 0) + 1
        for e in entries(rows, prices, self.rates):
            if e.row.ts < since:
                continue
            self._add(e, key + e.row.session_id, per_request)

    def _add(self, e: Entry, session: str, per_request: bool) -> None:
        self.total.add(e)
        _tally(self.days, day_of(e.row.ts)).add(e)
        if self.per_session:
            _tally(self.sessions, session).add(e)
            if e.row.ts > self.last_seen.get(session, 0.0):
                self.last_seen[session] = e.row.ts
        if per_request:
            _tally(self.requests, e.row.id).add(e)

    def span(self, first_day: int, last_day: int) -> Ledger:
        """The part of this ledger from ``first_day`` to ``last_day`` (UTC days, both in): its
        days, their total and their clients' requests (a week out of a month, read once)."""
        out = Ledger(self.rates, float(first_day * DAY), per_session=False)
        for d, tally in self.days.items():
            if first_day <= d <= last_day:
                out.days[d] = tally
                out.total.merge(tally)
        for d, n in self.client_days.items():
            if first_day <= d <= last_day:
                out.client_days[d] = n
                out.client_requests += n
        return out

    def why(self) -> dict[str, str]:
        """Why a part is empty, or what it still lacks, in words a user can act on."""
        out: dict[str, str] = {}
        if not self.client_requests:
            return {"all": "no request in this window: point a client at the proxy"}
        if not self.total.part("compression").requests:
            out["compression"] = (
                "no compression yet: no tool output in this window was long enough to shorten "
                "(or compression is off: EMBER_COMPRESS=off, or the x-ember-compress header)"
            )
        shaping = self.total.part("shaping")
        if not shaping.requests:
            out["shaping"] = (
                "no shaped request in this window: shaping acts on the user's own "
                "conversation (off with EMBER_OUTPUT_SHAPING=false)"
            )
        elif shaping.unestimated == shaping.requests:
            out["shaping"] = self.rates.why or "no estimate of what shaping saved yet"
        elif _label("shaping", shaping.labels) != "measured":
            out["shaping"] = (
                "shaping: no measurement yet, an estimate against the unshaped baseline; set "
                "output_holdout (e.g. 0.1) to measure"
            )
        if not self.total.part("memory_blocks").requests:
            out["memory_blocks"] = "no memory block injected in this window"
        return out

    def days_json(self, first_day: int | None = None, count: int | None = None) -> list[Any]:
        """Day by day, oldest first: every day of ``first_day`` + ``count`` (empty ones as
        zeros, for a plot), else the days that have entries."""
        if first_day is None or count is None:
            keys = sorted(self.days)
        else:
            keys = list(range(first_day, first_day + count))
        return [
            {"day": iso_day(d), "ts": d * DAY, **self.days.get(d, Tally()).brief()} for d in keys
        ]

    def sessions_json(self, only: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Per session, most recently seen first (``only``: those sessions, in that order)."""
        keys = (
            list(only)
            if only is not None
            else sorted(self.sessions, key=lambda s: -self.last_seen.get(s, 0.0))
        )
        return [{"session_id": s, **self.sessions[s].brief()} for s in keys if s in self.sessions]

    def to_json(self, window_days: int | None = None) -> dict[str, Any]:
        """The project's savings: the net and each part beside it, why a part is empty, and
        the days with entries (``ember stats --json``'s ``savings``)."""
        return {
            **self.total.to_json(),
            "window_days": window_days,
            "since": self.since,
            "why": self.why(),
            "basis": BASIS,
            "days": self.days_json(),
        }


def _tally(tallies: dict[Any, Tally], key: Any) -> Tally:
    found = tallies.get(key)
    if found is None:
        found = tallies[key] = Tally()
    return found


def window_start(days: int, now: float | None = None) -> float:
    """The start of the last ``days`` UTC days, today included (as the dashboard's charts)."""
    today = day_of(now if now is not None else time.time())
    return float((today - days + 1) * DAY)


def build(
    rows: Iterable[Mapping[str, Any]],
    prices: Prices,
    rates: OutputRates,
    since: float | None = None,
    *,
    per_request: bool = False,
) -> Ledger:
    """The ledger of one project's rows (as ``savings_rows`` reads them)."""
    ledger = Ledger(rates, since)
    ledger.add_rows((Row.of(r) for r in rows), prices, per_request=per_request)
    return ledger
