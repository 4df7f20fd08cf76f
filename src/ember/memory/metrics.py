"""What memory counts for ``/metrics``: what each new ask got, and the ask gate's state.

Registered on the app's registry when the stage starts (``Services.metrics``): one set per
app, never module globals — two proxies in one process (tests, the demo) would otherwise add
into the same counter. The gate's numbers are read from the gate when scraped, so the gauge
of busy slots is what the gate holds at that moment, not a copy that could drift from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ember.memory.gate import AskGate
from ember.memory.ledger import LedgerEntry

#: What a new ask of the user's thread got (``ask_result``).
RESULTS = ("injected", "empty", "busy", "unavailable")
#: The bounds an ask meets when memory is at capacity (``AskGate.turned_away_by``).
BOUNDS = ("slots", "cpu_share", "search_wait")


def ask_result(entry: LedgerEntry | None) -> str:
    """``injected``: a block went upstream; ``empty``: memory searched (or had nothing to
    search) and nothing qualified; ``busy``: memory was at capacity (``AskGate``);
    ``unavailable``: memory could not run (embedder still loading, store or database
    refusing), nothing recorded."""
    if entry is None:
        return "unavailable"
    if entry.busy:
        return "busy"
    return "injected" if entry.block else "empty"


class MemoryMetrics:
    def __init__(self, registry: CollectorRegistry, gate: AskGate) -> None:
        self.asks = Counter(
            "ember_memory_injections_total",
            "New asks of the user's thread, by what memory gave them.",
            ["result"],
            registry=registry,
        )
        self.injected_bytes = Counter(
            "ember_memory_injected_bytes_total",
            "UTF-8 bytes of the memory blocks added to new asks (a block replayed in the "
            "session's later requests is not counted again).",
            registry=registry,
        )
        for result in RESULTS:  # rate() sees 0 before the first ask
            self.asks.labels(result)
        registry.register(GateCollector(gate))

    def ask(self, entry: LedgerEntry | None) -> None:
        """Count what one new ask got (``entry`` None: memory could not run for it)."""
        self.asks.labels(ask_result(entry)).inc()
        if entry is not None and entry.block:
            self.injected_bytes.inc(len(entry.block.encode()))


class GateCollector(Collector):
    """The ask gate (memory's search slots), read at scrape time."""

    def __init__(self, gate: AskGate) -> None:
        self._gate = gate

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        gate = self._gate
        yield GaugeMetricFamily(
            "ember_memory_search_slots_busy",
            "Memory searches running now.",
            value=gate.busy,
        )
        yield GaugeMetricFamily(
            "ember_memory_search_slots",
            "Memory searches that may run at once (memory_concurrent_asks).",
            value=gate.limit,
        )
        turned = CounterMetricFamily(
            "ember_memory_asks_turned_away",
            "New asks that went on without memories because memory was at capacity, by the "
            "bound they met: every search slot busy, or memory's CPU share spent.",
            labels=["bound"],
        )
        for bound in BOUNDS:
            turned.add_metric([bound], gate.turned_away_by.get(bound, 0))
        yield turned
