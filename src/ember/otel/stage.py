"""The span exporter: after each answer, one span (``ember.exchange``) from the request's
start to its end, exported in batches in the SDK's own thread — never on the request path.

Fail open: an endpoint that is down loses spans (the SDK's exporter logs it), never a request;
an SDK that is not installed is said once at start, and the proxy runs without spans.
"""

from __future__ import annotations

import logging
from typing import Any

from ember.config import Settings
from ember.exchange import Exchange, Outcome, Stage
from ember.otel.settings import OtelSettings
from ember.otel.spans import attributes

log = logging.getLogger(__name__)
INSTALL = "pip install 'ember[otel]'"


class OtelStage(Stage):
    name = "otel"

    def __init__(self, settings: Settings, exporter: Any = None) -> None:
        """``exporter``: a span exporter of the SDK (tests pass an in-memory one); None: OTLP
        over HTTP to ``otel_endpoint``."""
        self.options = settings.section(OtelSettings)
        self.prices = settings.price_table()
        self.tracer: Any = None
        self._provider: Any = None
        try:
            self._build(exporter)
        except ImportError:
            log.error(
                "otel_endpoint is set but the OpenTelemetry SDK is not installed (%s); "
                "no spans are exported",
                INSTALL,
            )

    def _build(self, exporter: Any) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=self.options.otel_endpoint)
        resource = Resource.create({"service.name": self.options.otel_service_name})
        # A provider of its own, not the process's global one: an app embedding ember keeps
        # its tracing as it set it up.
        self._provider = TracerProvider(resource=resource)
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self._provider.get_tracer("ember")

    async def on_response(self, ex: Exchange, outcome: Outcome) -> None:
        if self.tracer is None:
            return
        start = int(ex.wall_started * 1e9)
        end = start + int(outcome.latency_ms * 1e6)
        span = self.tracer.start_span(
            "ember.exchange", start_time=start, attributes=attributes(ex, outcome, self.prices)
        )
        if outcome.kind != "ok":
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, outcome.kind))
        span.end(end_time=end)

    async def settle(self) -> None:
        if self._provider is not None:
            self._provider.force_flush(5_000)

    async def close(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()
