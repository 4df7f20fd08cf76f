"""The hand-over at the end of `ember wrap`, against a real `ember proxy` process and a slow
provider: the last wrap out asks the proxy to finish, the proxy says how many sessions it still
reads, keeps serving while it does (a wrap arriving meanwhile uses it), and stops by itself
once nobody uses it — or when its bound passes, having recorded what the cut read cost.

The session is an official Anthropic SDK client; the wrap's side is the real ``SharedProxy``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ember.clients.address import ProxyAddress
from ember.launch.probe import probe
from ember.launch.shared import Lease, SharedProxy
from ember.server import BackgroundServer, free_port
from ember.testing import Emulator, Reply
from ember.testing.shadow import shadow_path, shadow_replies
from tests.proxy.subprocess_proxy import proxy_process
from tests.shadow.test_e2e import FACT, ask, db_path, rows, wait_for

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

SESSION = "5c5c5c5c-0000-4000-8000-000000000003"
#: Shipped timing (a session is read after a quiet minute, so only the hand-over reads it);
#: memory off keeps the embedder out of it.
ENV = {"EMBER_MEMORY_MODE": "off"}


class _At:
    """Enough of a Stack for ``ask``: a base URL."""

    def __init__(self, url: str) -> None:
        self.url = url


def slow_reads(seconds: float) -> Any:
    answer = shadow_replies()

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        found = answer(body, path)
        if found is None or shadow_path(body) is None:
            return found
        return found.replace(delay_headers=seconds)

    return reply


@contextmanager
def wrapped_proxy(
    home: Path, upstream: str, env: dict[str, str]
) -> Iterator[tuple[Any, SharedProxy, Lease]]:
    """An `ember proxy` registered as a wrap started it, this test process the wrap using it."""
    port = free_port()
    with proxy_process(home, upstream, env=env, port=port) as (proc, url):
        run = home / "run"
        run.mkdir(parents=True, exist_ok=True)
        state = {"proxy_pid": proc.pid, "users": [os.getpid()]}
        (run / f"wrap-{port}.json").write_text(json.dumps(state))
        shared = SharedProxy(run, "127.0.0.1", ProxyAddress("127.0.0.1", port))
        ask(_At(url), SESSION, [], FACT)  # type: ignore[arg-type]
        yield proc, shared, Lease(started=True, log_path=shared.log_path)


def _shadow_calls(emulator: Emulator) -> int:
    return sum(b"[ember shadow turn]" in r.body for r in emulator.requests)


def test_a_wrap_arriving_while_the_proxy_finishes_uses_it_and_the_last_one_out_stops_it(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    emulator.reply_fn = slow_reads(5.0)
    home = tmp_path / "home"
    with (
        BackgroundServer(emulator) as up,
        wrapped_proxy(home, up.url, ENV) as (proc, shared, lease),
    ):
        started = time.monotonic()
        released = shared.release(lease)
        assert time.monotonic() - started < 3  # the answer comes at once, not after the read
        assert (released.stopped, released.reading, released.seconds) == (False, 1, 120)
        second = shared.acquire(None, 30)  # a new wrap: the finishing proxy serves it
        assert not second.started
        db = db_path(home)
        wait_for(lambda: rows(db, "SELECT 1 FROM shadow_memory_runs WHERE status='completed'"))
        time.sleep(1.0)
        assert proc.poll() is None  # read done, but a wrap uses it: it stays
        assert probe("127.0.0.1", shared.address.port).state == "ember"
        assert shared.release(second).stopped  # the last one out: nothing left to read
        assert proc.poll() == 0
    [(status, trigger)] = rows(db, "SELECT status, trigger FROM shadow_memory_runs")
    assert (status, trigger) == ("completed", "stopping")
    assert _shadow_calls(emulator) == 1


def test_a_read_past_the_bound_is_cut_its_cost_recorded_and_the_proxy_stops(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    emulator.reply_fn = slow_reads(60.0)
    home = tmp_path / "home"
    env = {**ENV, "EMBER_SHADOW_FINISH_SECONDS": "1"}
    with (
        BackgroundServer(emulator) as up,
        wrapped_proxy(home, up.url, env) as (proc, shared, lease),
    ):
        released = shared.release(lease)
        assert (released.reading, released.seconds) == (1, 1)
        assert proc.wait(30) == 0  # stopped by itself, the bound having passed
        assert probe("127.0.0.1", shared.address.port).state == "free"
        registry = json.loads((shared.run_dir / f"wrap-{shared.address.port}.json").read_text())
        assert registry == {"proxy_pid": None, "users": []}
    db = db_path(home)
    [(status, reason, calls, input_tokens, cache_read, usd)] = rows(
        db,
        "SELECT status, reason, calls, input_tokens, cache_read_tokens, estimated_usd "
        "FROM shadow_memory_runs",
    )
    assert (status, calls) == ("cancelled", 1)
    assert "estimated" in reason
    # The provider was asked: never $0. Nothing came back, so the usage is ember's estimate:
    # the session's prefix read from the cache it had just filled, the question fresh.
    assert input_tokens > 0 and cache_read > 0 and usd > 0
    [(outcome, estimated, cost)] = rows(
        db, "SELECT outcome, usage_estimated, cost_usd FROM exchanges WHERE origin = 'shadow'"
    )
    assert (outcome, estimated) == ("cancelled", 1) and cost == usd
    # The proxy's own stop did not ask the provider a second time for the same messages.
    assert _shadow_calls(emulator) == 1
