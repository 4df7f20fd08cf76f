"""The ledger of what was sent in place of each shortened output: it outlives the proxy, it is
bounded, and a ref is only ever found in its own project (both backends)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.compress.ledger import Entry, OutputLedger, digest, held, new_ref, prune
from ember.compress.retrieve import Retrieval
from ember.project import ProjectRef
from ember.store.registry import Storage

A = ProjectRef("/home/dev/shop", "header:x-ember-cwd")
B = ProjectRef("/home/dev/other", "header:x-ember-cwd")


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    store = Storage(tmp_path / "home", vec=False, store_url=url)
    yield store
    store.close()


def entry(session: str, text: str, message: int = 3) -> tuple[Entry, str]:
    d = digest("call_1", text)
    return Entry(new_ref(session, d), message, "call_1", d, "[short]", 900, 30), text


async def test_entries_outlive_the_process_and_refs_stay_in_their_project(
    storage: Storage,
) -> None:
    db_a, db_b = A.db_path(storage.home), B.db_path(storage.home)
    ledger = OutputLedger(storage)
    e, original = entry("s1", "line\n" * 400)
    await ledger.record(db_a, "s1", e, tool="Bash", how="lines", original=original, left_out=390)
    storage.database(db_a).flush(10)
    restarted = OutputLedger(storage)  # a new process: nothing in memory
    assert await restarted.entries(db_a, "s1") == {e.digest: e}
    text, error = await Retrieval(restarted, db_a).call("ember_retrieve", {"ref": e.ref})
    assert not error and text == original
    # Project B's proxy is asked for A's ref: it is not there (fail closed).
    storage.database(db_b).write(lambda c: None)  # B's database exists
    said, error = await Retrieval(restarted, db_b).call("ember_retrieve", {"ref": e.ref})
    assert error and f"no output with ref {e.ref} in this project" in said
    said, error = await Retrieval(restarted, db_a).call("ember_retrieve", {"ref": "../etc"})
    assert error and "'ref' must be the ref" in said


async def test_originals_are_bounded_by_age_and_by_size(storage: Storage) -> None:
    db = A.db_path(storage.home)
    ledger = OutputLedger(storage)
    for i in range(6):
        e, original = entry(f"s{i}", f"{i}" * 10_000, message=i)
        await ledger.record(db, f"s{i}", e, tool="Bash", how="lines", original=original, left_out=1)
    database = storage.database(db)
    database.flush(10)
    now = time.time()
    database.write(
        lambda c: c.execute(
            "UPDATE compress_outputs SET created_at = created_at - 40 * 86400 WHERE session_id='s0'"
        )
    )
    assert database.write(lambda c: prune(c, now - 30 * 86400, 10**9)) == 1  # the old one
    count, size, _ = database.read(held)
    assert count == 5 and size >= 5 * 10_000
    assert database.write(lambda c: prune(c, now - 30 * 86400, 25_000)) == 3  # oldest first
    count, size, _ = database.read(held)
    assert count == 2 and size <= 25_000


async def test_an_original_is_found_while_its_row_waits_for_the_writer(storage: Storage) -> None:
    """The model may ask for it in the very exchange that shortened it: the row is queued
    behind other writes then, and ``ember_retrieve`` must not answer "no output"."""
    import threading

    db = A.db_path(storage.home)
    ledger = OutputLedger(storage)
    database = storage.database(db)
    database.write(lambda c: None)
    release = threading.Event()
    database.submit(lambda c: release.wait(10), label="test")  # the writer is busy
    try:
        e, original = entry("s1", "line\n" * 400)
        await ledger.record(db, "s1", e, tool="Bash", how="lines", original=original, left_out=1)
        text, error = await Retrieval(ledger, db).call("ember_retrieve", {"ref": e.ref})
        assert not error and text == original
    finally:
        release.set()
    database.flush(10)
    text, error = await Retrieval(ledger, db).call("ember_retrieve", {"ref": e.ref})
    assert not error and text == original  # and from the row once it is written
