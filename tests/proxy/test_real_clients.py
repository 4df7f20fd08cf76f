"""What the real agent CLIs send, replayed byte for byte through the proxy.

The requests were recorded from Claude Code 2.1.197, Codex CLI 0.171.0, OpenCode 1.18.33, Gemini
CLI 0.61.0, Qwen Code 0.15.10 and aider 0.86.2 (``tests/fixtures/clients``); aider's carry the
project and session headers ``ember wrap aider`` adds, since its requests name neither.
Replayed in order against the proxy with every feature on, they must: resolve to the project
for every request of a session (one session, one database), leave side requests and
sub-agents untouched (no verbosity block, no memory), shape and remember on the user's own
thread, and never inject one fact twice in a session.
"""

from __future__ import annotations

import itertools
import json
import urllib.request
from pathlib import Path

import pytest

from ember.memory import HierarchicalMemory
from ember.project import resolve_project
from ember.shaping.verbosity import OPEN_TAG
from ember.store.accounting import exchanges
from ember.store.registry import stats_db_path
from tests.client_fixtures import (
    PROJECT_DIR,
    THREAD_KIND,
    ClientRequest,
    load_scenario,
    scenarios,
)
from tests.conftest import Stack, StackFactory
from tests.memory.conftest import HashEmbedder

MEMORY_TAG = b"<ember-memory>"


def send(stack: Stack, req: ClientRequest) -> bytes:
    """Replay one recorded request; returns the body the provider (emulator) received."""
    headers = {
        k: v
        for k, v in req.wrapped_headers.items()
        if k not in ("host", "content-length", "connection")
    }
    url = stack.url + req.path + (f"?{req.query}" if req.query else "")
    seen = len(stack.emulator.requests)
    request = urllib.request.Request(url, data=req.body or None, headers=headers, method=req.method)
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()
    fresh = stack.emulator.requests[seen:]
    return fresh[-1].body if fresh else b""


def project_db(home: Path) -> Path:
    ref = resolve_project({"x-ember-cwd": PROJECT_DIR})
    assert ref is not None
    return ref.db_path(home)


def model_calls(client: str, scenario: str) -> list[ClientRequest]:
    return [r for r in load_scenario(client, scenario) if r.is_model_call]


@pytest.mark.parametrize(("client", "scenario"), scenarios())
def test_every_request_of_a_session_lands_in_the_projects_database(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    stack = make_stack(stages="features")
    calls = model_calls(client, scenario)
    if not calls:
        pytest.skip("no model call in this scenario")
    for req in calls:
        send(stack, req)
    stack.settle()
    # in the order the requests arrived: a held row (a title request, before its session
    # named its project) is written after the rows that arrived later
    rows = sorted(exchanges(project_db(stack.home)), key=lambda r: r["ts"])
    assert len(rows) == len(calls)
    assert exchanges(stats_db_path(stack.home)) == []  # nothing strayed into the global file
    assert [r["thread_kind"] for r in rows] == [THREAD_KIND[r.kind] for r in calls]
    # Gemini CLI names no session: its routing call, on another model, is a session of its own
    bound = [row for row, r in zip(rows, calls, strict=True) if r.kind != "router"]
    assert len({r["session_id"] for r in bound}) == 1


@pytest.mark.parametrize(("client", "scenario"), scenarios())
def test_side_requests_and_subagents_are_forwarded_untouched(
    make_stack: StackFactory, client: str, scenario: str
) -> None:
    stack = make_stack(stages="features")
    seed(stack.home)
    for req in model_calls(client, scenario):
        got = send(stack, req)
        if THREAD_KIND[req.kind] != "main":  # titles, sub-agents, memory extraction, routing
            assert got == req.body, f"{req.name} was edited"
        elif req.kind == "main":
            assert OPEN_TAG.encode() in got, f"{req.name} lost its verbosity block"


def seed(home: Path) -> None:
    with HierarchicalMemory(project_db(home), HashEmbedder()) as mem:
        mem.add("notes.txt holds the team's todo list: buy milk, fix the flaky session test.")


NOTES_FACTS = [
    "notes.txt in the project is the team's todo list (milk, the flaky session test).",
    "The flaky test in test_session.py fails when the clock crosses midnight.",
]


@pytest.mark.parametrize("scenario", ["print-then-continue", "default-model-then-continue"])
def test_a_fact_injected_earlier_in_the_session_is_not_injected_again(
    make_stack: StackFactory, scenario: str
) -> None:
    """Both asks of the session find the same facts; only the first gets them (the ledger
    shows each fact in one entry, and no request carries a fact twice). On its default model
    Claude Code sends the first ask as ``[user ask, system note]``: still a new ask."""
    from ember.embedder import get_embedder
    from ember.store.driver import connect

    stack = make_stack(stages="features")
    db = project_db(stack.home)
    with HierarchicalMemory(db, get_embedder()) as mem:
        ids = [mem.add(f, importance=0.8).id for f in NOTES_FACTS]
    for req in model_calls("claude-code", scenario):
        send(stack, req)
    stack.settle()
    conn = connect(db, readonly=True).conn
    entries = [json.loads(r[0]) for r in conn.execute("SELECT memory_ids FROM memory_injections")]
    conn.close()
    assert len(entries) == 2  # two asks: "read notes.txt", then "is it a todo list?"
    assert entries[0]  # the first ask found the notes facts
    assert not set(entries[1]) & set(entries[0])  # nothing of it was injected again
    for r in stack.emulator.requests:
        for i in ids:
            assert r.body.count(f"[{i}]".encode()) <= 1, f"{i} injected twice in one request"


def test_claude_codes_connectivity_probe_is_answered_by_ember_not_a_guessed_provider(
    stack: Stack,
) -> None:
    [probe] = [r for r in load_scenario("claude-code", "print-then-continue") if r.kind == "probe"][
        :1
    ]
    request = urllib.request.Request(
        stack.url + probe.path, headers=dict(probe.headers), method=probe.method
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200
    assert stack.emulator.requests == []


@pytest.mark.parametrize("scenario", ["exec-then-resume", "default-model-exec-then-resume"])
def test_codex_gets_the_verbosity_block_at_the_tail_of_its_own_system_prompt(
    make_stack: StackFactory, scenario: str
) -> None:
    """Codex sends its prompt as developer input items and no ``instructions``: the block goes
    after them, not in a new ``instructions`` that would come before the client's prompt. With
    its default model the run opens with its tools (an ``additional_tools`` item of role
    developer, no content) and four developer messages: the block goes in the last of those."""
    stack = make_stack(stages="features")
    for req in model_calls("codex", scenario):
        got = json.loads(send(stack, req))
        assert "instructions" not in got
        run = list(itertools.takewhile(lambda i: i.get("role") == "developer", got["input"]))
        assert [i.get("type", "message") for i in run][-1] == "message"
        assert run[-1]["content"][-1]["text"].startswith(OPEN_TAG)
        assert json.dumps(got).count(OPEN_TAG) == 1
