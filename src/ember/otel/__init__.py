"""OpenTelemetry export: one span per exchange to an OTLP endpoint (off by default; the
``otel`` extra installs the SDK)."""
