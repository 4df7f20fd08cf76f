"""The dashboard's long lists come in pages with their total, never cut off unsaid, and a bad
edit of a memory is the user's 400, never the store's 503.

A project with more sessions than a page held (200) or more memories (500) showed the first
page as if it were everything. Through the real proxy and its dashboard API."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx2 as httpx
import pytest

from ember.project import resolve_project
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.schema import PROJECT
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, FACTS, seed
from tests.ui.test_dashboard_api import get, token

SESSIONS = 205  # one more page than the default page of 200 holds


def record_sessions(stack: Stack, count: int) -> None:
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    db = Database(ref.db_path(stack.home), PROJECT, log_failures=False)
    try:
        for i in range(count):
            row = ExchangeRecord(1_790_000_000.0 + i, f"session-{i:03d}", ACME, "anthropic",
                                 "claude-sonnet-4-5", 200, "ok", True, Usage(10, 5), 0.001,
                                 "snap", 1.0, None)  # fmt: skip
            db.write(row.insert)
    finally:
        db.close()


@pytest.fixture
def busy(make_stack: StackFactory) -> tuple[Stack, str, list[str]]:
    """A project with ``SESSIONS`` sessions and ``FACTS`` memories."""
    stack = make_stack(stages="features")
    ids = seed(stack.home, ACME, FACTS)
    record_sessions(stack, SESSIONS)
    [project] = [p for p in get(stack, "projects") if p["kind"] == "project"]
    return stack, str(project["name"]), ids


def test_sessions_past_one_page_say_their_total_and_the_next_page_holds_the_rest(
    busy: tuple[Stack, str, list[str]],
) -> None:
    stack, name, _ = busy
    first = get(stack, "sessions", project=name)
    assert (first["total"], first["offset"], first["limit"]) == (SESSIONS, 0, 200)
    assert len(first["sessions"]) == 200
    assert first["sessions"][0]["session_id"] == f"session-{SESSIONS - 1:03d}"  # newest first
    rest = get(stack, "sessions", project=name, offset=200)
    assert rest["total"] == SESSIONS and len(rest["sessions"]) == SESSIONS - 200
    seen = [s["session_id"] for s in first["sessions"] + rest["sessions"]]
    assert sorted(seen) == [f"session-{i:03d}" for i in range(SESSIONS)]
    assert get(stack, "sessions", project=name, offset=SESSIONS)["sessions"] == []


def test_memories_come_in_pages_with_their_total(busy: tuple[Stack, str, list[str]]) -> None:
    stack, name, ids = busy
    assert len(FACTS) == 3
    pages = [get(stack, "f/memory/memories", project=name, limit=2, offset=o) for o in (0, 2)]
    assert [len(p["memories"]) for p in pages] == [2, 1]
    assert all(p["total"] == len(FACTS) and p["limit"] == 2 for p in pages)
    assert sorted(m["id"] for p in pages for m in p["memories"]) == sorted(ids)
    whole = get(stack, "f/memory/memories", project=name)
    assert (whole["total"], whole["offset"], whole["limit"]) == (len(FACTS), 0, 500)


def test_a_page_out_of_range_is_a_clear_400(busy: tuple[Stack, str, list[str]]) -> None:
    stack, name, _ = busy
    for path in ("sessions", "f/memory/memories"):
        r = httpx.get(f"{stack.url}/ui/api/{path}", params={"project": name, "offset": "-1"})
        assert r.status_code == 400 and "offset=-1 is out of range" in r.json()["error"]


def edit(stack: Stack, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.url}/ui/api/f/memory/edit",
        content=json.dumps(body),  # NaN too (json.dumps writes it; a hand-made request may)
        headers={"x-ember-token": token(stack), "content-type": "application/json"},
        timeout=30,
    )


@pytest.mark.parametrize("importance", [1.5, -0.1, "high", True, math.nan, [0.5]])
def test_a_bad_importance_is_a_400_that_says_what_is_wrong(
    busy: tuple[Stack, str, list[str]], importance: Any
) -> None:
    stack, name, ids = busy
    r = edit(stack, {"project": name, "id": ids[0], "importance": importance})
    assert r.status_code == 400, r.text
    assert "importance must be a number from 0 to 1" in r.json()["error"]
    kept = get(stack, "f/memory/memory", project=name, id=ids[0])
    assert kept["importance"] == pytest.approx(0.8)  # unchanged


def test_a_good_importance_is_saved_and_a_forgotten_memory_is_a_404(
    busy: tuple[Stack, str, list[str]],
) -> None:
    stack, name, ids = busy
    r = edit(stack, {"project": name, "id": ids[0], "importance": 0.25})
    assert r.status_code == 200 and r.json()["importance"] == pytest.approx(0.25)
    r = edit(stack, {"project": name, "id": "0123456789ab", "importance": 0.5})
    assert r.status_code == 404 and "0123456789ab" in r.json()["error"]


def test_content_the_store_refuses_is_a_400(busy: tuple[Stack, str, list[str]]) -> None:
    stack, name, ids = busy
    r = edit(stack, {"project": name, "id": ids[0], "content": "x" * 100_000})
    assert r.status_code == 400 and "content" in r.json()["error"]
