"""The scheduler on its own (a fake runner): triggers, debounce, busy sessions, backoff."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from ember.exchange import TaskSet
from ember.project import ProjectRef
from ember.sessions import SessionRegistry
from ember.shadow.prefix import PrefixBook
from ember.shadow.runner import RunRecord, RunRequest
from ember.shadow.service import ShadowService

S = "sess"
PROJECT = ProjectRef("/p", "header:x-ember-cwd")


@dataclass
class FakeRunner:
    status: str = "completed"
    requests: list[RunRequest] = field(default_factory=list)
    prefixes: PrefixBook = field(default_factory=PrefixBook)

    async def run(self, req: RunRequest) -> RunRecord:
        self.requests.append(req)
        return RunRecord(f"r{len(self.requests)}", self.status, 10)

    def database(self, project: ProjectRef) -> Path:
        return Path("/nowhere")


class Wall:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def service(runner: FakeRunner, wall: Wall | None = None, idle: float = 60.0) -> ShadowService:
    sessions = SessionRegistry()
    svc = ShadowService(
        runner,  # type: ignore[arg-type]
        sessions,
        TaskSet(),
        idle_seconds=idle,
        tick_seconds=3600,
        wall=wall or Wall(),
    )
    st = svc.attach(S, PROJECT, "anthropic")
    st.generation = 1
    return svc


async def settle(svc: ShadowService) -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_trigger_runs_once_its_wait_is_over() -> None:
    runner = FakeRunner()
    svc = service(runner)
    svc.trigger(S, "turn-ended", delay=0.05)
    await asyncio.sleep(0.01)
    assert runner.requests == []  # still waiting: a user answering now costs nothing
    await asyncio.sleep(0.1)
    await settle(svc)
    assert [r.trigger for r in runner.requests] == ["turn-ended"]


async def test_a_session_with_a_request_in_flight_is_not_run_until_it_ends() -> None:
    runner = FakeRunner()
    svc = service(runner)
    svc.sessions.begin(S)
    svc.trigger(S, "turn-failed", delay=0.0)
    await asyncio.sleep(0.02)
    assert runner.requests == []
    svc.sessions.end(S)
    svc.kick(S)
    await settle(svc)
    assert [r.trigger for r in runner.requests] == ["turn-failed"]


async def test_cancel_drops_the_queued_trigger() -> None:
    runner = FakeRunner()
    svc = service(runner)
    svc.trigger(S, "turn-ended", delay=0.02)
    svc.cancel(S)
    await asyncio.sleep(0.05)
    await settle(svc)
    assert runner.requests == []


async def test_an_idle_session_is_run_from_the_tick_once() -> None:
    runner = FakeRunner()
    svc = service(runner, idle=0.0)
    svc.sessions.begin(S)
    svc.sessions.end(S)
    svc.tick()
    await asyncio.sleep(0.01)
    await settle(svc)
    svc.tick()  # still idle: not fired again until the session is active again
    await settle(svc)
    assert [r.trigger for r in runner.requests] == ["idle"]


async def test_three_failures_in_a_generation_back_off_six_hours() -> None:
    runner = FakeRunner(status="failed")
    wall = Wall()
    svc = service(runner, wall)
    for _ in range(4):
        svc.trigger(S, "turn-ended", delay=0.0)
        await asyncio.sleep(0.01)
        await settle(svc)
    assert len(runner.requests) == 3  # the fourth was backed off
    wall.now += 6 * 3600
    svc.trigger(S, "turn-ended", delay=0.0)
    await asyncio.sleep(0.01)
    await settle(svc)
    assert len(runner.requests) == 4
