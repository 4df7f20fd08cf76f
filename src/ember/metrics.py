"""The proxy's numbers for Prometheus (``GET /metrics``): the kernel's part.

Every app owns one ``CollectorRegistry`` (``Services.metrics``), never prometheus_client's
global one: tests and the demo run many apps in one process, and a second app registering the
same names in the global registry fails at start — or two apps add into the same counters. The
kernel's metrics are here: what the accounting stage counts (``ExchangeMetrics``) and the
storage's health (``StorageCollector``). A feature registers its own on ``Services.metrics`` in
its stage's ``start``; nothing here names one.

Labels are bounded, so a scrape stays small in a proxy that runs for weeks: a model keeps its
own label when it is in the price table, or among the first ``MODEL_LABELS`` other names seen;
past that it is ``other``. A client that sends a new model name with every request would
otherwise add series until the proxy runs out of memory.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from ember.prices import PriceTable
from ember.store.accounting import ExchangeRecord
from ember.store.health import State
from ember.store.registry import Storage

__all__ = ["MODEL_LABELS", "ExchangeMetrics", "StorageCollector", "new_registry"]

#: Model names outside the price table that keep a label of their own; later ones are ``other``.
MODEL_LABELS = 50
OTHER = "other"
#: The ``kind`` label of ``ember_tokens_total``: the four disjoint counters of ``Usage``.
TOKEN_KINDS = ("input", "cache_read", "cache_write", "output")
#: Outcomes that say more than an HTTP status (a stream cut after its 200, say): their name
#: is the status class.
_OUTCOME_CLASSES = frozenset({"stream_error", "cut", "cancelled", "timeout", "unreachable"})
#: A model's whole answer takes seconds to minutes; the default buckets stop at 10 s.
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, math.inf)
TTFB_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, math.inf)
#: The states of a database switched off (``ember.store.health``), each reported, 0 or not.
OFF_STATES: tuple[State, ...] = ("corrupt", "unwritable", "full", "ioerr", "busy", "unreachable")


M = TypeVar("M", bound=MetricWrapperBase)


class Children(Generic[M]):
    """A labelled metric's children, each looked up once: ``labels()`` checks its values and
    takes a lock on every call (about 1 µs; eight per exchange made counting one 13 µs of the
    event loop's time, 7 µs with this). The label values are bounded, so this dict is too.
    Used on the event loop only."""

    def __init__(self, metric: M) -> None:
        self.metric = metric
        self._by: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._by.get(values)
        if child is None:
            child = self._by[values] = self.metric.labels(*values)
        return child


def new_registry() -> CollectorRegistry:
    """An app's own registry (never the process-wide default: see the module)."""
    return CollectorRegistry()


def status_class(status: int, outcome: str) -> str:
    """A small, fixed set: ``2xx``..``5xx`` from the status the client got; an ``error``
    the provider put in a 200 body; or the outcome itself when the status cannot say it (a
    stream cut or failing after its 200, a client gone, a provider never reached)."""
    if outcome in _OUTCOME_CLASSES:
        return outcome
    if outcome == "upstream_error" and status < 400:
        return "error"
    if 100 <= status < 600:
        return f"{status // 100}xx"
    return OTHER


class ModelLabels:
    """The ``model`` label of a name: the name itself while labels are few, else ``other``.

    Names in the price table always keep theirs (a flood of made-up names must not hide the
    model the user pays for); a name that is not in it, exactly, counts against ``limit`` —
    a date suffix is free to vary, so ``claude-sonnet-4-5-2025xxxx`` counts too. Once a name
    has a label it keeps it: a series never changes its name mid-run."""

    def __init__(self, prices: PriceTable, limit: int = MODEL_LABELS) -> None:
        self._priced = frozenset(prices.prices)
        self._limit = limit
        self._named: set[str] = set()

    def __call__(self, model: str | None) -> str:
        if not model:
            return "none"
        if model in self._named or model in self._priced:
            return model
        if len(self._named) >= self._limit:
            return OTHER
        self._named.add(model)
        return model


class ExchangeMetrics:
    """What the accounting stage counts, from the very rows it writes to ``exchanges`` (same
    tokens, same cost, same status): a scrape and ``ember stats`` never disagree on what was
    spent. A row counts when the exchange is accounted, whether or not its database takes it
    (a switched-off file still has its traffic counted here)."""

    def __init__(
        self, registry: CollectorRegistry, prices: PriceTable, model_limit: int = MODEL_LABELS
    ) -> None:
        self.prices = prices
        self.models = ModelLabels(prices, model_limit)
        self.requests = Children(
            Counter(
                "ember_requests_total",
                "Requests accounted (a round of ember-owned tool calls counts as one of origin "
                "owned_tools).",
                ["protocol", "model", "origin", "thread_kind", "status_class"],
                registry=registry,
            )
        )
        self.tokens = Children(
            Counter(
                "ember_tokens_total",
                "Tokens the provider reported, by kind: fresh input, cache reads, cache "
                "writes, output (disjoint).",
                ["kind", "origin"],
                registry=registry,
            )
        )
        self.cost = Children(
            Counter(
                "ember_cost_usd_total",
                "USD of requests with a known cost, at the price table in force.",
                ["origin"],
                registry=registry,
            )
        )
        self.unpriced = Children(
            Counter(
                "ember_unpriced_requests_total",
                "Requests whose cost is unknown: a model without a price (reason no_price), "
                "or an answer without usage (no_usage).",
                ["origin", "reason"],
                registry=registry,
            )
        )
        self.latency = Children(
            Histogram(
                "ember_request_latency_seconds",
                "From the request's arrival to the end of its answer.",
                ["protocol"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            )
        )
        self.ttfb = Children(
            Histogram(
                "ember_time_to_first_byte_seconds",
                "From the request's arrival to the answer's first byte.",
                ["protocol"],
                buckets=TTFB_BUCKETS,
                registry=registry,
            )
        )
        share = Gauge(
            "ember_cache_read_share",
            "Cache reads over all input tokens since the proxy started (NaN before any); "
            "for a window, divide rates of ember_tokens_total.",
            registry=registry,
        )
        share.set_function(self.cache_read_share)
        self._cache_read = 0
        self._all_input = 0
        for kind in TOKEN_KINDS:  # a client's series exist from the start: rate() sees 0
            self.tokens(kind, "client")
        self.cost("client")

    def cache_read_share(self) -> float:
        return self._cache_read / self._all_input if self._all_input else math.nan

    def observe(self, record: ExchangeRecord, *, timed: bool = True) -> None:
        """Count one accounting row; ``timed``: its latencies are the exchange's own (a
        hidden round's row repeats its exchange's, which is timed once)."""
        origin = record.origin
        self.requests(
            record.protocol,
            self.models(record.model),
            origin,
            record.thread_kind or "main",
            status_class(record.status, record.outcome),
        ).inc()
        u = record.usage
        if u is not None:
            counts = (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens)
            for kind, n in zip(TOKEN_KINDS, counts, strict=True):
                if n:
                    self.tokens(kind, origin).inc(n)
            self._cache_read += u.cache_read_tokens
            self._all_input += u.total_input_tokens
        if record.cost_usd is not None:
            self.cost(origin).inc(record.cost_usd)
        else:
            reason = "no_price" if self.prices.lookup(record.model) is None else "no_usage"
            self.unpriced(origin, reason).inc()
        if timed:
            self.latency(record.protocol).observe(record.latency_ms / 1000)
            if record.ttfb_ms is not None:
                self.ttfb(record.protocol).observe(record.ttfb_ms / 1000)


class StorageCollector(Collector):
    """The storage's health, read at scrape time from ``Storage.problems()`` (what
    ``/healthz`` lists): databases switched off by state, writes held for a file that is off,
    and writes lost. Read when scraped, so it can never lag behind the file's own health."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        problems = self._storage.problems()
        off = collections.Counter(h.state for h in problems if not h.ok)
        gauge = GaugeMetricFamily(
            "ember_storage_problems",
            "Databases switched off now, by state (ember doctor says what to do).",
            labels=["state"],
        )
        for state in OFF_STATES:
            gauge.add_metric([state], off.get(state, 0))
        yield gauge
        yield GaugeMetricFamily(
            "ember_storage_held_writes",
            "Writes kept in memory for a database that is off, written when it is back.",
            value=sum(h.held for h in problems),
        )
        yield CounterMetricFamily(
            "ember_storage_dropped_writes",
            "Accepted writes never stored (databases switched off, hold limit reached).",
            value=sum(h.dropped for h in problems),
        )
