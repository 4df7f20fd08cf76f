"""What shadow memory counts for ``/metrics``: its runs and what its own calls cost.

Registered on the app's registry when the stage starts (``Services.metrics``), or on the
library's own in library mode (``ShadowLibrary.metrics``): one set per app, never module
globals — two proxies in one process (tests, the demo) would otherwise add into one counter.
Counted from the very values written to the database (a run's final status, each call's usage
and price), so ``/metrics`` agrees with ``ember shadow runs`` and with the rows of origin
``shadow``/``steward`` in ``exchanges``; the kernel's ``ember_requests_total`` never sees these
calls, which do not go through the proxy's pipeline.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from ember.shadow.models import CallUsage

#: A run's status once it ended (``runs.finish_run``, ``runs.skip_run``).
STATUSES = ("completed", "failed", "cancelled", "skipped")


class ShadowMetrics:
    """``registry`` None: counted but never exposed (a runner or steward built on its own,
    as tests do)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.runs = Counter(
            "ember_shadow_runs_total",
            "Shadow runs that ended, by final status and path (hot: a fork read from the "
            "cache; cold: the light model reading the backlog).",
            ["status", "path"],
            registry=registry,
        )
        self.cost = Counter(
            "ember_shadow_cost_usd_total",
            "USD of shadow memory's own calls with a known price (origin shadow: its runs; "
            "steward: the comparison in mode compare).",
            ["origin"],
            registry=registry,
        )
        self.tokens = Counter(
            "ember_shadow_tokens_total",
            "Tokens of shadow memory's own calls, by kind (as ember_tokens_total).",
            ["kind", "origin"],
            registry=registry,
        )
        for status in STATUSES:  # rate() sees 0 before the first run ends
            for path in ("hot", "cold"):
                self.runs.labels(status, path)
        self.cost.labels("shadow")

    def run(self, status: str, path: str) -> None:
        self.runs.labels(status, path).inc()

    def call(self, origin: str, usage: CallUsage) -> None:
        """One call of a run or of the steward, as its accounting row has it."""
        counts = (
            ("input", usage.input_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", usage.output_tokens),
        )
        for kind, n in counts:
            if n:
                self.tokens.labels(kind, origin).inc(n)
        if usage.usd is not None:
            self.cost.labels(origin).inc(usage.usd)
