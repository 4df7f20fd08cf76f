"""``GET /metrics`` through the real proxy: what a scrape says is what the ``exchanges`` table
holds — requests, tokens by kind, cost — whatever the outcome, and its labels stay bounded."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from ember.metrics import MODEL_LABELS
from ember.prices import BUILTIN_PRICES
from ember.project import resolve_project
from ember.store.accounting import exchanges
from ember.testing import Reply
from tests.conftest import Stack, StackFactory
from tests.metrics_support import scrape

CLAUDE = "claude-sonnet-4-5"
SYSTEM = [
    {
        "type": "text",
        "text": "You are a careful engineer. " * 400,
        "cache_control": {"type": "ephemeral"},
    }
]
KINDS = {
    "input": "input_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "output": "output_tokens",
}


def all_rows(stack: Stack) -> list[dict[str, Any]]:
    stack.settle()
    acme = resolve_project({"x-ember-project-id": "acme"})
    assert acme is not None
    return exchanges(acme.db_path(stack.home)) + exchanges(stack.home / "stats.db")


def mixed_traffic(stack: Stack) -> None:
    """Cached turns of a project's session, a stream, an unpriced model, a provider error and
    a stream the provider closed early: every outcome a row can have, over two databases."""
    headers = {"x-ember-project-id": "acme", "x-ember-session-id": "sess-1"}
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=headers
    ) as c:
        history: list[dict[str, Any]] = []
        for i in range(3):
            history.append({"role": "user", "content": f"step {i}"})
            msg = c.messages.create(
                model=CLAUDE,
                max_tokens=128,
                system=SYSTEM,  # type: ignore[arg-type]
                messages=history,  # type: ignore[arg-type]
            )
            history.append({"role": "assistant", "content": msg.content[0].text})  # type: ignore[union-attr]
    with anthropic.Anthropic(base_url=stack.url, api_key="k", max_retries=0) as c:
        one = [{"role": "user", "content": "hi"}]
        with c.messages.stream(model=CLAUDE, max_tokens=64, messages=one) as s:  # type: ignore[arg-type]
            s.until_done()
        stack.emulator.script(Reply(status=500, message="boom", error_type="api_error"))
        with pytest.raises(anthropic.InternalServerError):
            c.messages.create(model=CLAUDE, max_tokens=64, messages=one)  # type: ignore[arg-type]
        stack.emulator.script(
            Reply("A long answer, word after word, never finished.", close_after=6)
        )
        with c.messages.stream(model=CLAUDE, max_tokens=64, messages=one) as s:  # type: ignore[arg-type]
            list(s)
    with openai.OpenAI(base_url=stack.url + "/v1", api_key="k", max_retries=0) as o:
        o.chat.completions.create(model="my-local-llm", messages=[{"role": "user", "content": "x"}])


def test_a_scrape_counts_what_the_exchanges_table_holds(stack: Stack) -> None:
    mixed_traffic(stack)
    rows = all_rows(stack)
    m = scrape(stack.url)
    assert len(rows) == 7 and m.value("ember_requests_total") == 7
    assert m.by("ember_requests_total", "protocol", "model", "status_class") == {
        ("anthropic", CLAUDE, "2xx"): 4,
        ("anthropic", CLAUDE, "5xx"): 1,
        ("anthropic", CLAUDE, "cut"): 1,
        ("openai_chat", "my-local-llm", "2xx"): 1,
    }
    for kind, column in KINDS.items():
        assert m.value("ember_tokens_total", kind=kind) == sum(r[column] for r in rows), kind
    assert m.value("ember_tokens_total", kind="cache_read") > 0  # the session's turns hit
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    assert m.value("ember_cost_usd_total") == pytest.approx(sum(priced)) and sum(priced) > 0
    unpriced = sum(r["cost_usd"] is None for r in rows)
    assert unpriced >= 1 and m.value("ember_unpriced_requests_total") == unpriced
    # One latency per exchange; the share is the table's, since the start.
    assert m.value("ember_request_latency_seconds_count") == len(rows)
    timed = [r for r in rows if r["ttfb_ms"] is not None]
    assert m.value("ember_time_to_first_byte_seconds_count") == len(timed) > 0
    read = sum(r["cache_read_tokens"] for r in rows)
    every = sum(r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"] for r in rows)
    assert m.value("ember_cache_read_share") == pytest.approx(read / every)


def test_an_unknown_model_is_counted_unpriced_and_costs_nothing_in_the_total(
    stack: Stack,
) -> None:
    before = scrape(stack.url)
    assert math.isnan(before.value("ember_cache_read_share"))  # no input yet: no share
    httpx2.post(
        stack.url + "/v1/chat/completions",
        json={"model": "my-local-llm", "messages": [{"role": "user", "content": "x"}]},
    )
    [row] = all_rows(stack)
    assert row["cost_usd"] is None and row["output_tokens"] > 0
    m = scrape(stack.url)
    assert m.value("ember_unpriced_requests_total", reason="no_price") == 1
    assert m.value("ember_cost_usd_total") == 0
    assert m.value("ember_tokens_total", kind="output") == row["output_tokens"]


def test_the_model_label_stays_bounded_under_many_model_names(stack: Stack) -> None:
    """A client that makes up a model name per request must not grow a series per name: past
    MODEL_LABELS names they count as ``other``, and a priced model still has its own."""
    names = [f"made-up-{i}" for i in range(MODEL_LABELS + 10)]
    with httpx2.Client(base_url=stack.url) as client:
        for name in [*names, "gpt-5-mini"]:
            r = client.post(
                "/v1/chat/completions",
                json={"model": name, "messages": [{"role": "user", "content": "x"}]},
            )
            assert r.status_code == 200
    stack.settle()
    counts = scrape(stack.url).by("ember_requests_total", "model")
    assert counts[("other",)] == 10
    assert counts[("gpt-5-mini",)] == 1
    assert {m for (m,) in counts} - {"other", *BUILTIN_PRICES} == set(names[:MODEL_LABELS])
    assert sum(counts.values()) == len(names) + 1


def test_metrics_are_answered_by_ember_for_get_and_head_never_forwarded(stack: Stack) -> None:
    head = httpx2.head(stack.url + "/metrics")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == CONTENT_TYPE_LATEST
    assert scrape(stack.url).series("ember_requests_total") == []  # nothing asked yet
    assert not [r for r in stack.emulator.requests if "metrics" in r.path]


def test_each_app_counts_its_own_requests(make_stack: StackFactory) -> None:
    """Two proxies in one process (tests, the demo): neither sees the other's traffic, and
    neither fails to start for names the other registered."""
    first, second = make_stack(), make_stack()
    with httpx2.Client(base_url=first.url) as client:
        for _ in range(3):
            client.post(
                "/v1/chat/completions",
                json={"model": "gpt-5", "messages": [{"role": "user", "content": "x"}]},
            )
    first.settle()
    assert scrape(first.url).value("ember_requests_total") == 3
    assert scrape(second.url).value("ember_requests_total") == 0
    assert scrape(second.url).series("ember_cost_usd_total")  # registered: it started


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(4096, len(data)):
        data[i] = (i * 131) % 251
    path.write_bytes(bytes(data))


@pytest.mark.fault
def test_a_database_switched_off_shows_in_the_storage_gauge(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features")
    headers = {"x-ember-project-id": "fragile"}
    ask = {"model": CLAUDE, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=headers
    ) as c:
        c.messages.create(**ask)
        stack.settle()
        assert scrape(stack.url).value("ember_storage_problems") == 0
        ref = resolve_project(headers)
        assert ref is not None
        path = ref.db_path(stack.home)
        db = stack.app.storage.database(path)
        db.close()  # the writer lets go of the file, then the disk lies
        db.reopen()
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        _corrupt(path)
        for _ in range(3):
            c.messages.create(**ask)  # still answered
    stack.settle()
    m = scrape(stack.url)
    assert m.value("ember_storage_problems", state="corrupt") == 1
    assert m.value("ember_storage_problems") == 1
    assert m.value("ember_storage_dropped_writes_total") > 0  # the rows the file refused
    assert m.value("ember_requests_total") == 4  # traffic is counted all the same
    assert httpx2.get(stack.url + "/healthz").json()["storage"][0]["state"] == "corrupt"
