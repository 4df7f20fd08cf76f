"""Memory's share of the CPU: facts found in the background give way under a flood, and catch
up once the flood is over; facts a user saves never wait."""

from __future__ import annotations

import logging

import pytest

from ember.memory import HierarchicalMemory, NewMemory
from ember.memory.errors import MemoryStoreError
from ember.memory.share import CpuShare
from ember.store import writerloop
from tests.memory.conftest import HashEmbedder, OpenStore, RawSql
from tests.store.test_database import Disk, fill_up, until

FACT = "Staging deploys go out through the blue-green pipeline on Fridays"


class _Time:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _spent(share: CpuShare) -> None:
    share.charge(share.burst + 1.0)  # a flood's searches took it all


def _vectors(store: HierarchicalMemory) -> int:
    return int(RawSql(store).execute("SELECT count(*) FROM memory_vectors").fetchone()[0])


def test_a_background_fact_under_a_flood_is_stored_at_once_and_embedded_later(
    open_store: OpenStore, embedder: HashEmbedder
) -> None:
    t = _Time()
    share = CpuShare(0.1, cores=1, clock=t)
    store = open_store(cpu_share=share)
    _spent(share)
    calls = embedder.calls
    [fact] = store.add_many([NewMemory(FACT)], background=True)
    assert embedder.calls == calls  # no CPU taken from the requests
    assert store.deferred and _vectors(store) == 0
    # Found by its words at once.
    assert [h.memory.id for h in store.search("blue-green pipeline", touch=False)] == [fact.id]
    assert store.catch_up() == 0  # still spent: it waits
    t.now += 30.0  # the flood is over: the share refilled
    assert store.catch_up() == 1
    assert not store.deferred and _vectors(store) == 1
    assert store.catch_up() == 0
    hits = store.search("when do staging deploys go out", fusion="vector", touch=False)
    assert hits and hits[0].memory.id == fact.id  # and now by its meaning too


def test_facts_stored_without_vectors_are_said_once_a_minute(
    open_store: OpenStore, caplog: pytest.LogCaptureFixture
) -> None:
    share = CpuShare(0.1, cores=1, clock=_Time())
    store = open_store(cpu_share=share)
    _spent(share)
    with caplog.at_level(logging.WARNING, logger="ember.memory.deferral"):
        for i in range(3):
            store.add_many([NewMemory(f"{FACT}, number {i}")], background=True)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("memory: 1 fact(s) stored without")
    assert "memory_cpu_share" in lines[0]


def test_catching_up_is_bounded_and_charged(open_store: OpenStore) -> None:
    t = _Time()
    share = CpuShare(0.1, cores=1, clock=t)
    store = open_store(cpu_share=share)
    _spent(share)
    store.add_many([NewMemory(f"{FACT}, number {i}") for i in range(5)], background=True)
    t.now += 30.0
    assert store.catch_up(limit=2) == 2 and store.deferred  # more are waiting
    assert store.catch_up(limit=10) == 3 and not store.deferred
    assert _vectors(store) == 5


def test_with_credit_a_background_fact_is_embedded_at_once_and_charged(
    open_store: OpenStore,
) -> None:
    t = _Time()
    share = CpuShare(0.1, cores=1, burst=0.5, clock=t)
    store = open_store(cpu_share=share)
    store.add_many([NewMemory(FACT)], background=True)
    assert not store.deferred and _vectors(store) == 1
    share.charge(0.5 - 1e-6)  # what is left after the embedding was charged, if it was
    assert not share.available()


def test_a_fact_someone_waits_for_never_waits_for_the_share(open_store: OpenStore) -> None:
    share = CpuShare(0.1, cores=1, clock=_Time())
    store = open_store(cpu_share=share)
    _spent(share)
    store.add(FACT)  # the CLI, a memory tool: embedded now, whatever the flood
    assert not store.deferred and _vectors(store) == 1


def test_a_store_opened_afresh_embeds_what_a_flood_left(
    open_store: OpenStore, embedder: HashEmbedder
) -> None:
    """The proxy stopped before catching up: the next process embeds them on first use."""
    share = CpuShare(0.1, cores=1, clock=_Time())
    store = open_store(cpu_share=share)
    _spent(share)
    store.add_many([NewMemory(FACT)], background=True)
    store.close()
    again = open_store()
    hits = again.search("when do staging deploys go out", fusion="vector", touch=False)
    assert hits and hits[0].memory.content == FACT
    assert _vectors(again) == 1


def test_the_share_refills_out_of_idle_time_only_down_to_a_floor() -> None:
    """A saturated machine (a flood of agents, a build) leaves memory a quarter of its
    share; an idle one all of it."""
    from ember.memory.share import IDLE_FLOOR

    t = _Time()
    idle = [0.0]
    share = CpuShare(0.1, cores=2, burst=10.0, clock=t, idle=lambda: idle[0])
    share.charge(10.0)  # empty
    t.now += 10.0
    share.available()
    share.charge(0.2 * 10 * IDLE_FLOOR - 1e-6)  # what ten saturated seconds refilled
    assert share.available()
    share.charge(2e-6)
    assert not share.available()
    idle[0] = 1.0
    t.now += 1.0  # an idle second refills the whole 0.2 s
    share.available()
    share.charge(0.2 - 2e-6)
    assert share.available()


def test_machine_idle_reads_the_share_of_idle_ticks_between_readings() -> None:
    from ember.memory.share import MachineIdle

    t = _Time()
    ticks = [(100.0, 400.0)]
    idle = MachineIdle(read=lambda: ticks[0], clock=t, every=0.5)
    assert idle() == 1.0  # nothing measured yet
    ticks[0] = (130.0, 500.0)  # 30 of 100 ticks idle
    assert idle() == 1.0  # read at most every half second
    t.now += 0.5
    assert idle() == 0.3
    ticks[0] = (230.0, 600.0)
    t.now += 0.5
    assert idle() == 1.0
    none = MachineIdle(read=lambda: None, clock=t)
    t.now += 1.0
    assert none() == 1.0  # a platform that does not say: the whole share


def test_a_catch_up_refused_by_a_store_gone_away_loses_nothing_and_counts_nothing(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts keep waiting for their vectors; the refusal is not reported as a lost write
    (a PostgreSQL outage's "back" line said "1 lost" for it while nothing was)."""
    monkeypatch.setattr(writerloop, "connect", (disk := Disk()).connect)
    monkeypatch.setattr(writerloop, "RETRY_AFTER_SECONDS", 0.3)
    t = _Time()
    share = CpuShare(0.1, cores=1, clock=t)
    store = open_store(cpu_share=share)
    _spent(share)
    store.add_many([NewMemory(FACT)], background=True)
    db = store.database
    disk.fill(db)
    fill_up(db)
    dropped = db.health.dropped  # fill_up's own probe rows
    t.now += 30.0  # the share has credit: the catch-up embeds, and its write is refused
    with pytest.raises(MemoryStoreError):
        store.catch_up()
    assert store.deferred and db.health.dropped == dropped
    assert "memory" not in dict(db.health.dropped_by)
    disk.free()
    assert until(lambda: _caught_up(store), 10)  # the next catch-up after the retry is due
    assert _vectors(store) == 1 and not store.deferred


def _caught_up(store: HierarchicalMemory) -> bool:
    try:
        return store.catch_up() == 1
    except MemoryStoreError:
        return False
