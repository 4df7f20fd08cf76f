"""The dashboard's JSON over a proxy that served real SDK traffic through the emulator."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from ember.store.database import Database
from ember.store.schema import PROJECT
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import ACME, FACTS, memory_blocks, run_agent, seed


@pytest.fixture
def served(make_stack: StackFactory) -> tuple[Stack, list[str]]:
    stack = make_stack(stages="features")
    ids = seed(stack.home, ACME, FACTS)
    run_agent(stack)  # one ask with memories injected, two tool calls: three requests
    return stack, ids


def get(stack: Stack, path: str, **params: Any) -> Any:
    r = httpx.get(f"{stack.url}/ui/api/{path}", params=params, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def token(stack: Stack) -> str:
    page = httpx.get(f"{stack.url}/ui/", timeout=10).text
    found = re.search(r'name="ember-token" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def project_of(stack: Stack) -> str:
    [project] = [p for p in get(stack, "projects") if p["kind"] == "project"]
    assert project["identity"] == ACME
    return str(project["name"])


def test_spend_sessions_and_requests_are_the_accounting_rows(
    served: tuple[Stack, list[str]],
) -> None:
    stack, _ = served
    name = project_of(stack)
    spend = get(stack, "spend", days=7, by="model")
    assert spend["total"]["requests"] == 3
    assert [s["key"] for s in spend["series"]] and sum(spend["series"][0]["requests"]) == 3
    assert 0 <= spend["total"]["cache_read_share"] <= 1
    [session] = get(stack, "sessions", project=name)["sessions"]
    assert session["requests"] == 3 and session["ember_usd"] == 0
    rows = get(stack, "requests", project=name, session=session["session_id"])
    assert [r["origin"] for r in rows] == ["client"] * 3
    assert sum(r["output_tokens"] for r in rows) == session["output_tokens"]
    # what ember did to each request, noted with its row: the shipped verbosity level on
    # every request of the user's thread, memories injected into the new ask only
    assert [r["notes"]["shaping"]["level"] for r in rows] == [2, 2, 2]
    first, *later = rows
    assert first["notes"]["memory"]["injected"] >= 1 and first["notes"]["memory"]["bytes"] > 0
    assert all("memory" not in r["notes"] for r in later)


def test_the_request_view_shows_the_memory_block_that_was_injected(
    served: tuple[Stack, list[str]],
) -> None:
    stack, ids = served
    name = project_of(stack)
    [session] = get(stack, "sessions", project=name)["sessions"]
    [injected] = get(stack, "f/memory/injections", project=name, session=session["session_id"])
    sent = stack.emulator.requests[0].json()["messages"][0]["content"][1]["text"]
    assert injected["block"] == sent  # exactly the bytes the provider got
    assert set(injected["memory_ids"]) <= set(ids) and injected["memory_ids"]
    assert injected["bytes"] == len(sent.encode()) and injected["tokens"] > 0
    assert injected["used"] in (True, False)  # the answer after it was recorded


def test_a_requests_cited_tag_stays_as_answered_after_its_memories_are_forgotten(
    served: tuple[Stack, list[str]],
) -> None:
    """A request's "cited" is what the answers said of the block the model read: forgetting
    the memories later leaves the tag as it was (read from the live memories, it turned into
    "not cited"), and the page shows the ids as forgotten instead of linking to them."""
    stack, _ = served
    name = project_of(stack)
    [session] = get(stack, "sessions", project=name)["sessions"]
    [before] = get(stack, "f/memory/injections", project=name, session=session["session_id"])
    assert before["used"] is True and before["cited_ids"] and before["forgotten"] == []
    headers = {"x-ember-token": token(stack)}
    for memory_id in before["memory_ids"]:
        r = httpx.post(
            f"{stack.url}/ui/api/f/memory/forget",
            json={"project": name, "id": memory_id}, headers=headers, timeout=30,
        )  # fmt: skip
        assert r.status_code == 200, r.text
    [after] = get(stack, "f/memory/injections", project=name, session=session["session_id"])
    assert after["used"] is True and after["cited_ids"] == before["cited_ids"]
    assert after["forgotten"] == before["memory_ids"]


def test_a_memorys_page_lists_the_requests_it_went_into_with_counts(
    served: tuple[Stack, list[str]],
) -> None:
    stack, ids = served
    name = project_of(stack)
    run_agent(stack, session_id="0a1b2c3d-0000-4000-8000-000000000002")  # injected again
    sessions = [s["session_id"] for s in get(stack, "sessions", project=name)["sessions"]]
    blocks = {s: get(stack, "f/memory/injections", project=name, session=s) for s in sessions}
    assert all(ids[0] in b[0]["memory_ids"] for b in blocks.values())
    use = get(stack, "f/memory/memory", project=name, id=ids[0])["injections"]
    assert use["requests"] == 2 and use["unanswered"] == 0
    latest = use["latest"]
    assert sorted(r["session_id"] for r in latest) == sorted(sessions)
    first = min(b[0]["created_at"] for b in blocks.values())
    assert latest[0]["created_at"] > latest[1]["created_at"] == first  # newest first
    assert use["last_injected_at"] == latest[0]["created_at"]
    # each request's verdict is the one its own page shows, and the count is theirs
    for r in latest:
        assert r["cited"] == (ids[0] in blocks[r["session_id"]][0]["cited_ids"])
    assert use["cited"] == sum(r["cited"] for r in latest) >= 1
    carried = {i for b in blocks.values() for e in b for i in e["memory_ids"]}
    never = next(i for i in ids if i not in carried)
    empty = get(stack, "f/memory/memory", project=name, id=never)["injections"]
    assert empty == {
        "requests": 0, "cited": 0, "unanswered": 0, "last_injected_at": None, "latest": [],
    }  # fmt: skip


def test_the_overview_renders_with_no_data_at_all(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features")
    assert all(p["requests"] == 0 and p["usd"] == 0 for p in get(stack, "projects"))
    spend = get(stack, "spend", days=7)
    assert spend["series"] == [] and spend["total"]["requests"] == 0
    assert len(spend["days"]) == 7
    assert "ember-token" in httpx.get(f"{stack.url}/ui/", timeout=10).text


def test_search_explains_and_forget_removes_the_memory_from_the_database(
    served: tuple[Stack, list[str]],
) -> None:
    stack, ids = served
    name = project_of(stack)
    found = get(stack, "f/memory/memories", project=name, q="empty password login")
    top = found["memories"][0]
    assert top["id"] == ids[0] and top["explain"]["above_floor"] is True
    detail = get(stack, "f/memory/memory", project=name, id=ids[0])
    assert detail["content"] == FACTS[0] and detail["history"][0]["id"] == ids[0]
    url = f"{stack.url}/ui/api/f/memory/forget"
    body = {"project": name, "id": ids[0]}
    refused = httpx.post(url, json=body, timeout=10)  # no token: a page on another origin
    assert refused.status_code == 403
    done = httpx.post(url, json=body, headers={"x-ember-token": token(stack)}, timeout=30)
    assert done.status_code == 200 and done.json()["deleted"] == [ids[0]]
    stack.app.storage.flush(10)
    path = stack.home / "projects" / name / "ember.db"
    db = Database(path, PROJECT, log_failures=False)
    try:
        left = db.read(lambda c: [r[0] for r in c.execute("SELECT id FROM memories")])
    finally:
        db.close()
    assert ids[0] not in left and set(ids[1:]) <= set(left)
    # and the proxy that served the page no longer injects it into a new session
    before = len(stack.emulator.requests)
    run_agent(stack, session_id="0a1b2c3d-0000-4000-8000-000000000002")
    [block] = memory_blocks(stack.emulator.requests[before].json()["messages"][0])
    assert ids[0] not in block and "empty password" not in block


def test_edit_changes_the_fact_and_its_search(served: tuple[Stack, list[str]]) -> None:
    stack, ids = served
    name = project_of(stack)
    headers = {"x-ember-token": token(stack)}
    body = {"project": name, "id": ids[2], "content": "The team squashes commits before merging."}
    r = httpx.post(f"{stack.url}/ui/api/f/memory/edit", json=body, headers=headers, timeout=30)
    assert r.status_code == 200 and r.json()["content"] == body["content"]
    hits = get(stack, "f/memory/memories", project=name, q="squash commits merging")["memories"]
    assert hits[0]["id"] == ids[2]


def test_bad_input_gets_a_clear_error_and_never_another_project(
    served: tuple[Stack, list[str]],
) -> None:
    stack, _ = served
    for project in ("../../etc", "nope-0123456789abcdef", ""):
        r = httpx.get(f"{stack.url}/ui/api/f/memory/memories", params={"project": project})
        assert r.status_code in (400, 404) and r.json()["error"]
    r = httpx.get(f"{stack.url}/ui/api/spend", params={"by": "colour"})
    assert r.status_code == 400 and "choose one of" in r.json()["error"]
    r = httpx.get(f"{stack.url}/ui/api/spend", params={"days": "a year"})
    assert r.status_code == 400 and "not a whole number" in r.json()["error"]
    r = httpx.get(f"{stack.url}/ui/api/sessions", params={"project": "x", "limit": "0"})
    assert r.status_code == 400 and "out of range" in r.json()["error"]
    assert not (stack.home / "projects" / "nope-0123456789abcdef").exists()


def test_a_rebound_host_name_is_refused(served: tuple[Stack, list[str]]) -> None:
    stack, _ = served
    r = httpx.get(f"{stack.url}/ui/api/projects", headers={"host": "evil.example:8787"})
    assert r.status_code == 421
    said = r.json()["error"]
    assert "Host 'evil.example:8787' is not the dashboard's" in said and "allowed_hosts" in said
    assert "acme" not in r.text.lower()
    served_by_port = httpx.get(f"{stack.url}/ui/api/projects", headers={"host": "localhost:1"})
    assert served_by_port.status_code == 200


def test_a_page_of_another_origin_cannot_forget_even_with_the_token(
    served: tuple[Stack, list[str]],
) -> None:
    stack, ids = served
    name = project_of(stack)
    headers = {"x-ember-token": token(stack), "origin": "http://evil.example"}
    body = {"project": name, "id": ids[0]}
    url = f"{stack.url}/ui/api/f/memory/forget"
    r = httpx.post(url, json=body, headers=headers, timeout=10)
    assert r.status_code == 403 and "http://evil.example" in r.json()["error"]
    kept = get(stack, "f/memory/memory", project=name, id=ids[0])
    assert kept["content"] == FACTS[0]
    own = {**headers, "origin": stack.url}  # the dashboard's own page
    assert httpx.post(url, json=body, headers=own, timeout=30).status_code == 200


def test_no_page_may_frame_the_dashboard(served: tuple[Stack, list[str]]) -> None:
    stack, _ = served
    for path in ("/ui/", "/ui/api/projects", "/ui/static/app.js"):
        r = httpx.get(stack.url + path, timeout=10)
        assert r.status_code == 200, path
        assert r.headers["content-security-policy"] == "frame-ancestors 'none'"
        assert r.headers["x-frame-options"] == "DENY"
    refused = httpx.get(f"{stack.url}/ui/", headers={"host": "evil.example"}, timeout=10)
    assert refused.headers["x-frame-options"] == "DENY"


def test_the_live_feed_announces_a_new_request(served: tuple[Stack, list[str]]) -> None:
    stack, _ = served
    assert feed_announces_a_new_request(stack) == project_of(stack)


def feed_announces_a_new_request(stack: Stack) -> str | None:
    """The project the live feed names first after the agent's next request (None: none)."""
    events: list[str] = []

    def listen() -> None:
        with httpx.stream("GET", f"{stack.url}/ui/api/events", timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    events.append(line)
                    return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    threading.Event().wait(1.5)  # the feed has taken its first look
    run_agent(stack)
    t.join(20)
    return str(json.loads(events[0][5:])["project"]) if events else None


def test_a_remote_peer_is_refused_even_naming_a_loopback_host(tmp_path: Path) -> None:
    """A proxy bound to all interfaces keeps its dashboard to this machine."""
    import asyncio

    from ember.compose import spec
    from ember.config import load_settings
    from ember.store.registry import Storage
    from ember.ui.app import Dashboard

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def call(client: tuple[str, int]) -> int:
        sent.clear()
        scope = {
            "type": "http", "method": "GET", "path": "/ui/api/features", "raw_path": b"",
            "query_string": b"", "headers": [(b"host", b"127.0.0.1:8787")], "client": client,
            "server": ("0.0.0.0", 8787), "scheme": "http", "root_path": "", "http_version": "1.1",
        }  # fmt: skip
        await dash(scope, receive, send)
        return int(sent[0]["status"])

    settings = load_settings(env={"EMBER_HOME": str(tmp_path / "home")})
    dash = Dashboard(settings, Storage(settings.home, vec=False), spec().views())
    assert asyncio.run(call(("192.168.1.20", 50000))) == 403
    assert asyncio.run(call(("127.0.0.1", 50000))) == 200


def test_a_memorys_evidence_is_the_transcript_message_it_points_at(
    served: tuple[Stack, list[str]],
) -> None:
    from ember.embedder import get_embedder
    from ember.facts import Evidence
    from ember.memory import HierarchicalMemory

    stack, _ = served
    name = project_of(stack)
    stack.app.storage.flush(10)
    path = stack.home / "projects" / name / "ember.db"
    db = stack.app.storage.database(path)
    message_id, content = db.read(
        lambda c: c.execute(
            "SELECT id, content FROM transcript_messages WHERE role = 'user' ORDER BY seq LIMIT 1"
        ).fetchone()
    )
    with HierarchicalMemory(db, get_embedder()) as store:
        fact = store.add(
            "The user wants the login fix first.",
            evidence=(Evidence("user-stated", message_id=message_id),),
        )
    shown = get(stack, "f/memory/memory", project=name, id=fact.id)
    [evidence] = shown["evidence"]
    assert evidence["kind"] == "user-stated" and evidence["text"] == content
