"""Reading ``/metrics`` as Prometheus does: over HTTP, parsed by prometheus_client's parser."""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


@dataclass(frozen=True)
class Scrape:
    samples: list[Sample]

    def series(self, name: str, **labels: str) -> list[Sample]:
        """The samples of ``name`` whose labels include ``labels``."""
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """The sum over the series of ``name`` that match ``labels`` (0 when none)."""
        return sum(s.value for s in self.series(name, **labels))

    def by(self, name: str, *keys: str) -> dict[tuple[str, ...], float]:
        """``name``'s non-zero values summed by the label values ``keys``."""
        out: dict[tuple[str, ...], float] = {}
        for s in self.series(name):
            if s.value:
                key = tuple(s.labels[k] for k in keys)
                out[key] = out.get(key, 0.0) + s.value
        return out


def parse(text: str) -> Scrape:
    return Scrape([s for f in text_string_to_metric_families(text) for s in f.samples])


def scrape(base_url: str) -> Scrape:
    r = httpx2.get(base_url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"] == CONTENT_TYPE_LATEST
    return parse(r.text)
