"""OpenTelemetry's settings: a flat section (``otel_endpoint``, ``EMBER_OTEL_ENDPOINT``...)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class OtelSettings(BaseModel):
    """What the span exporter reads (``settings.section(OtelSettings)``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: An OTLP/HTTP traces endpoint (``http://127.0.0.1:4318/v1/traces`` for a local
    #: collector); unset: no spans. Needs ``pip install 'ember[otel]'``.
    otel_endpoint: str | None = None
    #: The ``service.name`` of the spans.
    otel_service_name: str = Field(default="ember", min_length=1)
