"""Spend limits held by several proxies sharing one store (one SQLite home, or one
PostgreSQL): three proxies in front of one emulator, bursts of concurrent requests through the
official SDK. Each proxy used to read the shared spend every few seconds and admit against it,
so they all admitted the same room: a $0.05 limit was passed three times over. Now a request
holds its room in the store before it is forwarded, and a limit is passed by at most the cost
of one request."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx
import pytest

from ember.budget import held, policy
from ember.budget.stage import BudgetStage
from ember.config import Settings
from ember.exchange import Stage
from ember.project import resolve_project
from ember.store.registry import Storage
from ember.testing import Emulator
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME

#: About twelve of the requests below ($0.0016 each at the emulator's counts).
LIMIT = 0.02
PROXIES, WORKERS = 3, 4


def ask(url: str, **kw: Any) -> anthropic.types.Message:
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=2) as client:
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=64,
            system=f"Working directory: {ACME}",
            messages=[{"role": "user", "content": "hello"}],
            **kw,
        )


def proxies(
    make_stack: StackFactory, request: pytest.FixtureRequest, backend: str, **kw: Any
) -> list[Stack]:
    """``PROXIES`` proxies on one home (and, for ``postgres``, one PostgreSQL database)."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    emulator = kw.pop("emulator", None) or Emulator(latency=0.15)
    stages = kw.pop("stages", "features")
    options = {"budget_daily_usd": LIMIT, "budget_refuse": True, "store_url": url} | kw
    return [make_stack(stages=stages, emulator=emulator, **options) for _ in range(PROXIES)]


def project_rows(stack: Stack) -> list[Any]:
    """(outcome, cost) of every client row of the project, read through the store."""
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    db = stack.app.storage.database(ref.db_path(stack.home))
    sql = "SELECT outcome, cost_usd FROM exchanges WHERE origin = 'client'"
    return list(db.read(lambda c: c.execute(sql).fetchall()))


def burst(stacks: list[Stack]) -> list[anthropic.RateLimitError]:
    """``WORKERS`` agents per proxy at once, each asking until refused for good: a refusal
    while requests in flight hold the rest of the limit (no retry date) is asked again once
    they are answered; one with a retry date (the limit is spent) ends the agent."""
    refusals: list[anthropic.RateLimitError] = []
    lock = threading.Lock()

    def agent(url: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                ask(url)
            except anthropic.RateLimitError as err:
                with lock:
                    refusals.append(err)
                if "retry-after" in err.response.headers:
                    return
                time.sleep(0.05)

    threads = [
        threading.Thread(target=agent, args=(s.url,)) for s in stacks for _ in range(WORKERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    for s in stacks:
        s.settle()
    return refusals


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_three_proxies_in_a_burst_pass_a_limit_by_one_request_at_most(
    make_stack: StackFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    stacks = proxies(make_stack, request, backend)
    refusals = burst(stacks)
    rows = project_rows(stacks[0])
    costs = [cost for outcome, cost in rows if outcome == "ok"]
    spent = sum(costs)
    assert LIMIT <= spent <= LIMIT + max(costs) + 1e-9, (spent, len(costs))
    # each agent ended on a refusal of the spent limit, in the provider's shape, not retried
    final = [e for e in refusals if "retry-after" in e.response.headers]
    assert len(final) == PROXIES * WORKERS
    assert all(e.response.headers["x-should-retry"] == "false" for e in refusals)
    assert all("daily limit of $0.0200" in e.body["error"]["message"] for e in final)  # type: ignore[index]
    assert len(stacks[0].emulator.requests) == len(costs)  # refused: never forwarded
    assert sorted({o for o, _ in rows}) == ["ok", "refused"]


def _slow_first(emulator: Emulator, seconds: float) -> None:
    from ember.testing import Reply

    emulator.script(Reply("a long answer", delay_headers=seconds))


def _budget_only(ttl: float, kept: list[BudgetStage]) -> Any:
    def build(settings: Settings, storage: Storage) -> list[Stage]:
        stage = BudgetStage(settings, storage, ttl=ttl)
        kept.append(stage)
        return [stage]

    return build


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_running_request_holds_its_room_and_a_stopped_proxys_lets_it_go(
    make_stack: StackFactory, request: pytest.FixtureRequest, backend: str
) -> None:
    """One request reserved the whole limit (``budget_reserve_usd``). While it runs, longer
    than a reservation lives unrenewed, its proxy renews it and the others refuse; once its
    proxy stops renewing (as a killed proxy does), the room comes back within that time."""
    emulator = Emulator()
    kept: list[BudgetStage] = []
    first, second, _ = proxies(
        make_stack,
        request,
        backend,
        emulator=emulator,
        stages=_budget_only(0.6, kept),
        budget_reserve_usd=LIMIT,
    )
    _slow_first(emulator, 4.0)
    runner = threading.Thread(target=ask, args=(first.url,))
    runner.start()
    try:
        time.sleep(1.5)  # past the reservation's 0.6 s: alive only because it is renewed
        with pytest.raises(anthropic.RateLimitError) as err:
            ask(second.url)
        assert "holds $0.0200 for requests in flight" in err.value.body["error"]["message"]  # type: ignore[index]
        assert "retry-after" not in err.value.response.headers  # no date: it comes back sooner
        assert kept[0]._keeper is not None
        kept[0]._keeper.cancel()  # the first proxy stops renewing, as if killed
        time.sleep(1.0)
        ask(second.url)  # its room came back
    finally:
        runner.join(10)


def test_the_dashboard_shows_what_requests_in_flight_hold(make_stack: StackFactory) -> None:
    emulator = Emulator()
    stack = make_stack(
        stages="features",
        emulator=emulator,
        budget_daily_usd=LIMIT,
        budget_refuse=True,
        budget_reserve_usd=0.005,
    )
    ask(stack.url)  # the project exists, with a row
    stack.settle()
    [project] = [
        p for p in httpx.get(f"{stack.url}/ui/api/projects").json() if p["kind"] == "project"
    ]

    def standing() -> dict[str, Any]:
        params = {"project": project["name"], "identity": project["identity"]}
        got: dict[str, Any] = httpx.get(
            f"{stack.url}/ui/api/f/budget/standing", params=params
        ).json()
        return got

    _slow_first(emulator, 1.5)
    runner = threading.Thread(target=ask, args=(stack.url,))
    runner.start()
    try:
        deadline = time.monotonic() + 5
        while standing()["in_flight"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        during = standing()
    finally:
        runner.join(10)
    stack.settle()
    after = standing()
    [day] = during["limits"]
    assert during["in_flight"] == 1 and day["reserved_usd"] == pytest.approx(0.005)
    assert day["spent_usd"] == pytest.approx(project["usd"], abs=1e-6)
    assert after["in_flight"] == 0 and after["limits"][0]["reserved_usd"] == 0
    assert after["spent_day_usd"] > during["spent_day_usd"]


def test_a_reservation_left_unrenewed_expires(tmp_path: Path) -> None:
    """Written as a killed proxy leaves it: counted until its expiry, then not at all."""
    from ember.store.database import Database
    from ember.store.schema import PROJECT

    db = Database(tmp_path / "ember.db", PROJECT, log_failures=False)
    try:
        now = time.time()
        left = held.Reservation("r1", "s1", now, 0.5, now + 10)
        limits = policy.Limits(1.0, None)
        db.write(lambda c: held.reserve(c, left, limits, now))
        assert db.read(lambda c: held.standing(c, now)).reserved_day == 0.5
        assert db.read(lambda c: held.standing(c, now + 11)).reserved_day == 0
        assert db.write(lambda c: held.sweep(c, now + 11)) == 1
    finally:
        db.close()


def test_a_proxy_that_stops_gives_back_what_requests_that_never_ended_hold(
    tmp_path: Path,
) -> None:
    """An exchange that broke off inside ember never reaches the response stages: its
    reservation is given back when the proxy stops, not held until it expires."""
    import asyncio

    from ember.config import load_settings

    settings = load_settings(env={"EMBER_HOME": str(tmp_path)}, budget_daily_usd=1.0)
    storage = Storage(tmp_path)
    stage = BudgetStage(settings, storage)
    path = tmp_path / "projects" / "p-0000000000000000" / "ember.db"
    now = time.time()
    left = held.Reservation("r1", "s1", now, 0.5, now + 60)
    db = storage.database(path)
    db.write(lambda c: held.reserve(c, left, policy.Limits(1.0, None), now))
    stage.flights.take_off(path, "r1")
    try:
        assert db.read(lambda c: held.standing(c, now)).in_flight == 1
        asyncio.run(stage.close())
        assert db.read(lambda c: held.standing(c, now)).in_flight == 0
    finally:
        storage.close()
