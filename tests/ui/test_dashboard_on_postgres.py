"""The dashboard over a PostgreSQL store (``store_url``, issue #24): no file is kept in the
home, so the projects, their spend, their memories and the live feed come from the schemas
the proxies write — and a made-up project name still reaches nothing and creates nothing."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.store.pg.names import schema_name
from tests.conftest import Stack, StackFactory
from tests.memory.conftest import pg_database
from tests.memory.test_stage_e2e import ACME, FACTS, run_agent
from tests.ui.test_dashboard_api import feed_announces_a_new_request, get, project_of, token

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


@pytest.fixture
def served(make_stack: StackFactory, pg_url: str) -> tuple[Stack, list[str]]:
    stack = make_stack(stages="features", store_url=pg_url)
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None
    db = pg_database(pg_url, stack.home, ref.db_path(stack.home))
    try:
        with HierarchicalMemory(db, get_embedder()) as mem:
            ids = [mem.add(f, importance=0.8).id for f in FACTS]
    finally:
        db.close()
    run_agent(stack)  # three requests, memories injected into the first
    stack.app.storage.flush(10)
    return stack, ids


def test_projects_spend_and_memories_come_from_the_schemas(
    served: tuple[Stack, list[str]],
) -> None:
    stack, ids = served
    name = project_of(stack)  # the project's identity, read from its schema
    ref = resolve_project({}, None, f"Working directory: {ACME}")
    assert ref is not None and name == ref.db_path(stack.home).parent.name  # its real folder
    assert not list(stack.home.rglob("ember.db"))
    assert get(stack, "spend", days=7, by="model")["total"]["requests"] == 3
    [session] = get(stack, "sessions", project=name)["sessions"]
    assert session["requests"] == 3
    found = get(stack, "f/memory/memories", project=name, q="empty password login")
    assert found["memories"][0]["id"] == ids[0]
    url = f"{stack.url}/ui/api/f/memory/forget"
    done = httpx.post(
        url, json={"project": name, "id": ids[0]}, headers={"x-ember-token": token(stack)},
        timeout=30,
    )  # fmt: skip
    assert done.status_code == 200 and done.json()["deleted"] == [ids[0]]
    left = get(stack, "f/memory/memories", project=name, q="empty password login")
    assert ids[0] not in [m["id"] for m in left["memories"]]


def test_a_made_up_project_is_a_404_and_creates_no_schema(
    served: tuple[Stack, list[str]], pg_url: str
) -> None:
    stack, _ = served
    made_up = "nope-0123456789abcdef"
    r = httpx.get(f"{stack.url}/ui/api/f/memory/memories", params={"project": made_up})
    assert r.status_code == 404 and r.json()["error"]
    with psycopg.connect(pg_url) as conn:
        names = [n for (n,) in conn.execute("SELECT nspname FROM pg_namespace").fetchall()]
    assert schema_name(stack.home, stack.home / "projects" / made_up / "ember.db") not in names


def test_the_live_feed_announces_a_new_request(served: tuple[Stack, list[str]]) -> None:
    """A change is a move of the schema's write counter (no file's time to watch there)."""
    stack, _ = served
    assert feed_announces_a_new_request(stack) == project_of(stack)


def test_a_memorys_requests_and_their_cited_tags_come_from_the_schema(
    served: tuple[Stack, list[str]],
) -> None:
    """The same reads on the server: a memory's requests with their verdicts, and a
    request's "cited" unchanged by a later forget."""
    stack, ids = served
    name = project_of(stack)
    [session] = get(stack, "sessions", project=name)["sessions"]
    [block] = get(stack, "f/memory/injections", project=name, session=session["session_id"])
    assert ids[0] in block["memory_ids"] and block["used"] is True
    use = get(stack, "f/memory/memory", project=name, id=ids[0])["injections"]
    [request] = use["latest"]
    assert use["requests"] == 1 and request["session_id"] == session["session_id"]
    assert request["cited"] == (ids[0] in block["cited_ids"]) and use["cited"] == int(
        request["cited"]
    )
    for memory_id in block["memory_ids"]:
        done = httpx.post(
            f"{stack.url}/ui/api/f/memory/forget", json={"project": name, "id": memory_id},
            headers={"x-ember-token": token(stack)}, timeout=30,
        )  # fmt: skip
        assert done.status_code == 200
    [after] = get(stack, "f/memory/injections", project=name, session=session["session_id"])
    assert after["cited_ids"] == block["cited_ids"] and after["forgotten"] == block["memory_ids"]
