"""What ember saved its users and what it spent on its own, netted (pure: accounting rows and
prices in, dollars out; the rows are read by ``ember.store.accounting.savings_rows``).

Saved, per client request:
- **compression** (``notes.compress``): tokens left out of tool outputs, priced as that request
  billed them. Outputs shortened in this request are new at the tail: the cache-write price when
  the request wrote cache, else fresh input. Outputs replayed from earlier requests sit in the
  prefix: the cache-read price when the request read cache (else as written, or fresh). So a
  40 KB log left out once is counted again on every request that would have re-read it, at the
  price the provider bills that re-read, and not at one flat rate.
- **shaping**: output tokens per shaped request from shaping's own report (``OutputRates``:
  measured against holdout sessions where it can be, else estimated against the unshaped
  baseline), by model family, at the request's output price; labelled as it is labelled there.

Spent, by ember on its own:
- **shadow**, **steward**, **retrievals** (``owned_tools``: the rounds of ``ember_retrieve`` and
  the memory tools), **learn**: their rows' own billed cost. A tool round also grows the
  request that answers after it: the client's row (the last round) reads the call and what it
  brought back, which the first round did not; those added tokens, at the price that row
  billed them (fresh first), are the retrieval's too — a retrieval of 120 log lines costs far
  more in the round that reads them than in the round that asked for them.
- **memory blocks** (``notes.memory``): each injected block's tokens, from its bytes
  (``MEMORY_BYTES_PER_TOKEN``: the rows keep bytes, not text), fresh on its ask, written by the
  next request and read by every later request of the same conversation (thread).
- **verbosity block** (``notes.shaping``) and **tool definitions** ember adds
  (``notes.compress.tool_tokens``, where the stage notes them): fixed bytes in a conversation's
  prefix, written with its first request and re-read with each later one (tokens from the
  feature: ember's estimator).

Never a smaller number than the truth: a price that is unknown makes that part's ``usd`` None
and the net None ("unknown", with how many requests lack a price), never $0. A shaped request
whose model family has no estimate yet is counted as such, with the reason shaping gives.
Prices are today's table (``ember.prices``), the same for every row, so a saving and the spend
it is netted against are priced alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from ember.prices import Price
from ember.strata import model_family

#: The path of the dashboard view a feature declares to give the output it saved per request
#: (``OutputRates`` as JSON); the kernel looks it up by this name, never by importing it.
RATES_VIEW = "output-rates"
DAY = 86_400

SAVED = ("compression", "shaping")
SPENT = (
    "shadow",
    "steward",
    "retrievals",
    "memory_blocks",
    "verbosity_block",
    "tool_definitions",
    "learn",
    "other",
)
#: Bytes of an injected memory block per token of ember's estimator (``ember.tokens``): 2.9 to
#: 3.7 on rendered blocks of 1 to 10 memories (the READ-ONLY header, an [id] and a date on each
#: line), 3.0 from 3 memories up. ``bytes / 4``, a rule for prose, undercounted them by a quarter.
MEMORY_BYTES_PER_TOKEN = 3.0
_ORIGIN_PART = {
    "shadow": "shadow",
    "steward": "steward",
    "owned_tools": "retrievals",
    "learn": "learn",
}
#: How each part is known: billed by the provider, or estimated by ember.
LABELS = {
    "compression": "estimated",
    "shaping": "estimated",
    "shadow": "billed",
    "steward": "billed",
    "retrievals": "billed",
    "memory_blocks": "estimated",
    "verbosity_block": "estimated",
    "tool_definitions": "estimated",
    "learn": "billed",
    "other": "billed",
}
BASIS = {
    "prices": "today's price table, per request's model",
    "compression": "tokens left out (ember's estimator), at the price each request billed them",
    "memory_blocks": f"block bytes / {MEMORY_BYTES_PER_TOKEN:g} (ember's estimator on rendered "
    "blocks); fresh on its ask, written by the next request, read by each later one",
    "shaping": "output tokens per shaped request from `ember output-savings`, by model family",
}


class Prices(Protocol):
    def lookup(self, model: str | None) -> Price | None: ...


@dataclass(frozen=True)
class OutputRate:
    """Output tokens saved per shaped request of one model family, with its 95% band."""

    tokens: float
    low: float | None
    high: float | None
    label: str
    requests: int


@dataclass(frozen=True)
class OutputRates:
    """What output shaping reports (``RATES_VIEW``): a rate per model family, its block's
    tokens per level, and why there is no rate yet (None when every family has one)."""

    families: Mapping[str, OutputRate] = field(default_factory=dict)
    block_tokens: Mapping[int, int] = field(default_factory=dict)
    why: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> OutputRates:
        """Parse the view's document; raises ``ValueError`` naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("output rates: expected an object")
        families = {}
        for name, r in (data.get("families") or {}).items():
            if not isinstance(r, dict) or not _number(r.get("tokens_per_request")):
                raise ValueError(f"output rates: family {name!r} has no tokens_per_request")
            families[str(name)] = OutputRate(
                float(r["tokens_per_request"]),
                float(r["low"]) if _number(r.get("low")) else None,
                float(r["high"]) if _number(r.get("high")) else None,
                str(r.get("label") or "estimated"),
                int(r.get("requests") or 0),
            )
        blocks = {int(k): int(v) for k, v in (data.get("block_tokens") or {}).items()}
        why = data.get("why")
        return cls(families, blocks, why if isinstance(why, str) else None)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _count(v: Any) -> float:
    """A non-negative count from a note; 0 for anything else (a note is never trusted)."""
    return float(v) if _number(v) and v > 0 else 0.0


@dataclass(frozen=True)
class Row:
    """One accounting row as the ledger reads it (``savings_rows``)."""

    id: int
    ts: float
    session_id: str
    thread: str
    origin: str
    model: str | None
    ok: bool
    input: int
    cache_read: int
    cache_write: int
    cache_write_1h: int
    output: int
    cost_usd: float | None
    notes: Mapping[str, Any]

    @classmethod
    def of(cls, r: Mapping[str, Any]) -> Row:
        notes = r.get("notes")
        if isinstance(notes, str):
            notes = _json(notes)
        return cls(
            int(r["id"]),
            float(r["ts"]),
            str(r["session_id"]),
            str(r.get("thread") or r["session_id"]),
            str(r.get("origin") or "client"),
            r.get("model"),
            r.get("outcome") == "ok" and bool(r.get("usage_known", 1)),
            int(r.get("input_tokens") or 0),
            int(r.get("cache_read_tokens") or 0),
            int(r.get("cache_write_tokens") or 0),
            int(r.get("cache_write_1h_tokens") or 0),
            int(r.get("output_tokens") or 0),
            None if r.get("cost_usd") is None else float(r["cost_usd"]),
            notes if isinstance(notes, dict) else {},
        )

    @property
    def billed_input(self) -> bool:
        """The provider billed input on it (a refused or failed call read nothing)."""
        return self.input + self.cache_read + self.cache_write > 0

    def note(self, stage: str) -> Mapping[str, Any]:
        value = self.notes.get(stage)
        return value if isinstance(value, dict) else {}


def _json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}


@dataclass(frozen=True)
class Entry:
    """One row's part: dollars (None: unknown price), tokens, and for an estimate its band.
    ``unestimated``: a shaped request whose model family has no estimate yet."""

    row: Row
    part: str
    usd: float | None
    tokens: float = 0.0
    low: float | None = None
    high: float | None = None
    unestimated: bool = False
    block: bool = False
    label: str | None = None
    #: False: part of a request already counted in this part (a tool round's added input)
    counted: bool = True


def _write_rate(row: Row, p: Price) -> float:
    one_hour = row.cache_write_1h * 2 >= row.cache_write
    rate = p.cache_write_1h if one_hour and p.cache_write_1h is not None else p.cache_write_5m
    return rate if rate is not None else p.input


def tail_rate(row: Row, p: Price) -> float:
    """USD per million tokens of content new in this request: written to the cache when the
    request wrote cache, else fresh input."""
    return _write_rate(row, p) if row.cache_write > 0 else p.input


def prefix_rate(row: Row, p: Price) -> float:
    """USD per million tokens of content sent before in the same conversation: read from the
    cache when the request read cache, else billed as new."""
    return p.cache_read if row.cache_read > 0 else tail_rate(row, p)


def entries(rows: Iterable[Row], prices: Prices, rates: OutputRates) -> Iterator[Entry]:
    """Every row's parts; a conversation's rows are taken in order (its blocks re-read)."""
    threads: dict[tuple[str, str], list[Row]] = {}
    rounds: dict[tuple[str, str, float], Row] = {}  # an exchange's first tool round
    for row in rows:
        if row.origin != "client":
            part = _ORIGIN_PART.get(row.origin, "other")
            yield Entry(row, part, row.cost_usd, _read(row))
            key = (row.session_id, row.thread, row.ts)  # a round keeps its exchange's start
            if part == "retrievals" and (key not in rounds or row.id < rounds[key].id):
                rounds[key] = row
            continue
        threads.setdefault((row.session_id, row.thread), []).append(row)
    for conversation in threads.values():
        conversation.sort(key=lambda r: r.id)
        yield from _conversation(conversation, prices, rates, rounds)


def _read(row: Row) -> int:
    """Every input token the provider billed on the row, fresh, read or written."""
    return row.input + row.cache_read + row.cache_write


def _rounds_added(row: Row, first: Row, price: Price | None) -> Entry | None:
    """What the tool rounds added to the request that answered after them: its input beyond
    the first round's, priced as it was billed (fresh first, then written, then read)."""
    added = _read(row) - _read(first)
    if added <= 0:
        return None
    if price is None:
        return Entry(row, "retrievals", None, added, counted=False)
    fresh = min(added, row.input)
    written = min(added - fresh, row.cache_write)
    read = added - fresh - written
    usd = fresh * price.input + written * _write_rate(row, price) + read * price.cache_read
    return Entry(row, "retrievals", usd / 1e6, added, counted=False)


def _conversation(
    rows: list[Row],
    prices: Prices,
    rates: OutputRates,
    rounds: Mapping[tuple[str, str, float], Row],
) -> Iterator[Entry]:
    memory = _MemoryBlocks()
    verbosity, tools = _Fixed("verbosity_block"), _Fixed("tool_definitions")
    for row in rows:
        price = prices.lookup(row.model)
        first_round = rounds.get((row.session_id, row.thread, row.ts))
        if first_round is not None:
            added = _rounds_added(row, first_round, price)
            if added is not None:
                yield added
        if row.billed_input:
            yield from _compression(row, price)
            yield from memory.entries(row, price)
            block = _block(row, rates)
            if block is not None:
                yield verbosity.entry(row, price, *block)
            defined = _count(row.note("compress").get("tool_tokens"))
            if defined:
                yield tools.entry(row, price, defined, defined)
        shaped = _shaping(row, price, rates)
        if shaped is not None:
            yield shaped


class _Fixed:
    """Fixed bytes ember adds to a conversation's prefix (its verbosity block, a tool
    definition): written by the first request that carries them, or a changed version of them
    (``key``), and read by each later one."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.key: Any = None

    def entry(self, row: Row, price: Price | None, key: Any, tokens: float) -> Entry:
        fresh, self.key = key != self.key, key
        return _priced(row, self.part, tokens, price, tail_rate if fresh else prefix_rate, fresh)


class _MemoryBlocks:
    """The memory blocks one conversation carries, and what each request pays for them.

    A block is appended after the client's last breakpoint (memory's stage), so the ask's own
    request reads it as fresh input; the next request, whose breakpoint moved past it, writes
    it to the cache (or, without cache writes, reads what the provider cached by itself); every
    later one reads it. Priced any other way, a block looked 1.25x cheaper on its ask and
    10x cheaper on the request after."""

    def __init__(self) -> None:
        self.cached = 0.0  # tokens in the cache
        self.pending = 0.0  # tokens sent once, not yet in the cache

    def entries(self, row: Row, price: Price | None) -> Iterator[Entry]:
        reread = bool(self.cached or self.pending)
        if reread:
            usd = None
            if price is not None:
                written = _write_rate(row, price) if row.cache_write else prefix_rate(row, price)
                usd = (self.cached * prefix_rate(row, price) + self.pending * written) / 1e6
            yield Entry(row, "memory_blocks", usd, self.cached + self.pending)
            self.cached, self.pending = self.cached + self.pending, 0.0
        note = row.note("memory")
        size = _count(note.get("bytes"))
        if size and not note.get("busy"):
            tokens = math.ceil(size / MEMORY_BYTES_PER_TOKEN)
            usd = None if price is None else tokens * price.input / 1e6
            yield Entry(row, "memory_blocks", usd, tokens, block=True, counted=not reread)
            self.pending += tokens


def _priced(
    row: Row, part: str, tokens: float, price: Price | None, rate: Any, block: bool = False
) -> Entry:
    usd = None if price is None else tokens * rate(row, price) / 1e6
    return Entry(row, part, usd, tokens, block=block)


def _compression(row: Row, price: Price | None) -> Iterator[Entry]:
    note = row.note("compress")
    new, replayed = _count(note.get("saved_new")), _count(note.get("saved_replayed"))
    if not new and not replayed:
        return
    if price is None:
        yield Entry(row, "compression", None, new + replayed)
        return
    usd = (new * tail_rate(row, price) + replayed * prefix_rate(row, price)) / 1e6
    yield Entry(row, "compression", usd, new + replayed)


def _block(row: Row, rates: OutputRates) -> tuple[int, int] | None:
    """(level, tokens) of the verbosity block this request carried, when known."""
    note = row.note("shaping")
    level = note.get("level")
    if note.get("arm") != "treatment" or not note.get("block") or not isinstance(level, int):
        return None
    tokens = rates.block_tokens.get(level)
    return (level, tokens) if tokens else None


def _shaping(row: Row, price: Price | None, rates: OutputRates) -> Entry | None:
    if row.note("shaping").get("arm") != "treatment" or not row.ok:
        return None
    rate = rates.families.get(model_family(row.model))
    if rate is None:
        return Entry(row, "shaping", 0.0, unestimated=True)
    if price is None:
        return Entry(row, "shaping", None, rate.tokens, label=rate.label)

    def usd(tokens: float | None) -> float | None:
        return None if tokens is None else tokens * price.output / 1e6

    low, high = usd(rate.low), usd(rate.high)
    return Entry(row, "shaping", usd(rate.tokens), rate.tokens, low, high, label=rate.label)
