"""One span per exchange, through the real proxy and the anthropic SDK: in memory, and over
OTLP/HTTP to a collector on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest

from ember.config import Settings
from ember.exchange import Stage
from ember.otel.stage import OtelStage
from ember.store.accounting import exchanges
from ember.store.registry import Storage
from tests.conftest import StackFactory
from tests.memory.test_stage_e2e import run_agent

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is a dev dependency")
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)


def test_each_exchange_is_one_span_with_the_accounted_numbers(make_stack: StackFactory) -> None:
    exporter = InMemorySpanExporter()

    def stages(settings: Settings, storage: Storage) -> list[Stage]:
        return [OtelStage(settings, exporter)]

    stack = make_stack(stages=stages, otel_endpoint="http://127.0.0.1:9/v1/traces")
    run_agent(stack)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3 and {s.name for s in spans} == {"ember.exchange"}
    [path] = list((stack.home / "projects").glob("*/ember.db"))
    rows = sorted(exchanges(path), key=lambda r: r["ts"])
    spans = sorted(spans, key=lambda s: s.start_time)
    for span, row in zip(spans, rows, strict=True):
        a = dict(span.attributes or {})
        assert a["gen_ai.system"] == "anthropic" and a["gen_ai.request.model"] == row["model"]
        assert a["gen_ai.usage.output_tokens"] == row["output_tokens"]
        assert a["ember.usage.cache_read_tokens"] == row["cache_read_tokens"]
        assert a["ember.cost_usd"] == pytest.approx(row["cost_usd"])
        assert a["http.response.status_code"] == 200
        assert span.end_time is not None and span.end_time > span.start_time
        text = repr(a)
        # the project by its folder's name (basename and digest), never the path; no key
        assert a["ember.project"].startswith("acme-api-") and "/home/dev" not in text
        assert "Bearer" not in text and "x-api-key" not in text and "sk-" not in text


class _Collector(BaseHTTPRequestHandler):
    posts: ClassVar[list[tuple[str, str, int]]] = []

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", 0))
        self.rfile.read(size)
        self.posts.append((self.path, self.headers.get("content-type", ""), size))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.posts = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_an_otlp_collector_over_http(make_stack: StackFactory, collector: str) -> None:
    stack = make_stack(stages="features", otel_endpoint=collector)
    run_agent(stack)  # settle() flushes the batch
    assert _Collector.posts, "no OTLP export reached the collector"
    path, kind, size = _Collector.posts[0]
    assert path == "/v1/traces" and kind == "application/x-protobuf" and size > 0
