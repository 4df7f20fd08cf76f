"""The cold path, the triggers that lead to it, and the real Claude Code session shape."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.compose import build_storage
from ember.config import load_settings
from ember.project import ProjectRef
from ember.proxy.upstream import Upstream
from ember.server import BackgroundServer
from ember.shadow import cursors
from ember.shadow.prefix import PrefixBook
from ember.shadow.runner import RunRequest, ShadowRunner
from ember.store.transcript_rows import Row, insert_rows
from ember.testing import Emulator
from ember.testing.replies import Reply
from ember.testing.shadow import shadow_replies
from tests.client_fixtures import load_scenario
from tests.conftest import Stack, StackFactory
from tests.shadow.test_e2e import FACT, ask, db_path, rows, wait_for

PROJECT = ProjectRef("/home/dev/cold-project", "header:x-ember-cwd")


async def test_the_cold_path_reads_the_backlog_in_pages_with_the_light_model(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    emulator.reply_fn = shadow_replies()
    with BackgroundServer(emulator) as up:
        settings = load_settings(
            env={}, home=tmp_path, anthropic_url=up.url, light_api_key="sk-ember-light"
        )
        storage = build_storage(settings)
        db = storage.database(PROJECT.db_path(tmp_path))
        lines = [
            f"Remember: service {i} listens on port {8000 + i}. " + "detail " * 60
            for i in range(12)
        ]
        db.write(cursors.activate)
        db.write(
            lambda c: insert_rows(
                c,
                [
                    Row(f"m{i:012x}", "s", 1, i, 0, "user", "user", f"d{i}", t)
                    for i, t in enumerate(lines)
                ],
            )
        )
        upstream = Upstream.from_settings(settings)
        runner = ShadowRunner(
            settings,
            storage,
            upstream,
            lambda adapter, path, query: up.url + path,
            PrefixBook(),
            settings.price_table(),
            page_tokens=600,
        )
        # The session's spend: a cap needs something to be a share of.
        db.write(
            lambda c: c.execute(
                "INSERT INTO exchanges (ts, session_id, protocol, model, status, outcome, stream, "
                "usage_known, cost_usd, price_snapshot, latency_ms) "
                "VALUES (0, 's', 'anthropic', 'claude-sonnet-4-5', 200, 'ok', 1, 1, 100.0, 'x', 1)"
            )
        )
        record = await runner.run(RunRequest("s", 1, PROJECT, "idle", "anthropic"))
        await upstream.close()
        assert record is not None and record.status == "completed"
        [(path, model, calls)] = db.read(
            lambda c: [
                tuple(r) for r in c.execute("SELECT path, model, calls FROM shadow_memory_runs")
            ]
        )
        pages = [json.loads(r.body) for r in emulator.requests]
        assert path == "cold" and model == "claude-haiku-4-5" and calls == len(pages) > 1
        assert all(p["model"] == "claude-haiku-4-5" for p in pages)
        assert all(r.header("x-api-key") == "sk-ember-light" for r in emulator.requests)
        seen = "".join(p["messages"][0]["content"] for p in pages)
        assert all(f"m:m{i:012x}" in seen for i in range(12))  # every line, on exactly one page
        assert sum(p["messages"][0]["content"].count("m:m") for p in pages) == 12
        proposals = db.read(
            lambda c: c.execute("SELECT COUNT(*) FROM shadow_fact_proposals").fetchone()[0]
        )
        assert proposals == 12
        storage.close()


def test_a_failed_turn_without_credentials_in_memory_is_skipped_with_the_reason(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.script(Reply("", status=529, error_type="overloaded_error", message="busy"))
    db = db_path(stack.home)
    with pytest.raises(anthropic.APIStatusError):  # the user sees the failure
        ask(stack, "0e0e0e0e-0000-4000-8000-000000000005", [], FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs"))
    [(trigger, status, reason)] = rows(db, "SELECT trigger, status, reason FROM shadow_memory_runs")
    assert (trigger, status) == ("turn-failed", "skipped") and "credentials" in reason


def test_a_restarted_history_has_its_old_generation_read_cold(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.reply_fn = shadow_replies()
    db = db_path(stack.home)
    session = "0f0f0f0f-0000-4000-8000-000000000006"
    history: list[dict[str, Any]] = []
    ask(stack, session, history, FACT)
    wait_for(lambda: rows(db, "SELECT status FROM shadow_memory_runs WHERE status='completed'"))
    ask(stack, session, history, "Remember: the staging database is reset every night.")
    # A compaction: the conversation restarts from a summary, same session.
    ask(stack, session, [], "This session continues a previous conversation. Summary: deploys.")
    wait_for(
        lambda: rows(
            db,
            "SELECT 1 FROM shadow_memory_runs "
            "WHERE trigger='generation-ended' AND status='completed'",
        )
    )
    [(generation, path)] = rows(
        db, "SELECT generation, path FROM shadow_memory_runs WHERE trigger='generation-ended'"
    )
    assert (generation, path) == (1, "cold")  # its prefix is gone: the light model reads it


def send(stack: Stack, req: Any) -> None:
    headers = {
        k: v for k, v in req.headers.items() if k not in ("host", "content-length", "connection")
    }
    url = stack.url + req.path + (f"?{req.query}" if req.query else "")
    request = urllib.request.Request(url, data=req.body or None, headers=headers, method=req.method)
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()


def test_the_shadow_forks_from_the_users_thread_never_a_subagent_or_title(
    make_stack: StackFactory,
) -> None:
    """Claude Code's main thread, its Explore sub-agent and (elsewhere) a title request share
    one session id: the shadow's request must extend the main thread's last request."""
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0)
    stack.emulator.reply_fn = shadow_replies()
    calls = [r for r in load_scenario("claude-code", "subagent-then-continue") if r.is_model_call]
    for req in calls:
        send(stack, req)
    wait_for(lambda: any(b"[ember shadow turn]" in r.body for r in stack.emulator.requests))
    bodies = [json.loads(r.body) for r in stack.emulator.requests]
    [shadow] = [b for b in bodies if "[ember shadow turn]" in json.dumps(b)][:1]
    mains = [
        b
        for b, r in zip(bodies, stack.emulator.requests, strict=False)
        if not r.header("x-claude-code-agent-id") and b is not shadow
    ]
    last_main = [b for b in mains if "[ember shadow turn]" not in json.dumps(b)][-1]
    assert shadow["system"] == last_main["system"] and shadow["tools"] == last_main["tools"]
    n = len(last_main["messages"])
    stripped = [_without_cache_control(m) for m in shadow["messages"][:n]]
    assert stripped == [_without_cache_control(m) for m in last_main["messages"]]
    assert shadow["model"] == last_main["model"] != "claude-haiku-4-5-20251001"


def _without_cache_control(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": content}


def test_a_kill_9_during_a_run_leaves_no_partial_proposals(tmp_path: Path) -> None:
    from tests.proxy.subprocess_proxy import proxy_process

    emulator = Emulator()
    answer = shadow_replies()

    def hanging(body: dict[str, Any], path: str) -> Reply | None:
        reply = answer(body, path)
        return None if reply is None else Reply(reply.text, delay_headers=60)

    emulator.reply_fn = hanging
    home = tmp_path / "home"
    env = {
        "EMBER_SHADOW": "primary",
        "EMBER_SHADOW_MAX_SHARE": "1",
        "EMBER_SHADOW_IDLE_SECONDS": "0.3",
        "EMBER_MEMORY_MODE": "off",
    }
    session = "1a1a1a1a-0000-4000-8000-000000000007"
    with BackgroundServer(emulator) as up:
        with proxy_process(home, up.url, env=env) as (proc, url):
            ask(_At(url, home), session, [], FACT)
            wait_for(lambda: any(b"[ember shadow turn]" in r.body for r in emulator.requests))
            proc.kill()
            proc.wait(10)
        db = db_path(home)
        assert rows(db, "SELECT status FROM shadow_memory_runs") == [("running",)]
        assert rows(db, "SELECT COUNT(*) FROM shadow_fact_proposals") == [(0,)]
        with proxy_process(home, up.url, env=env) as (_, url):
            emulator.reply_fn = None
            ask(_At(url, home), "1b1b1b1b-0000-4000-8000-000000000008", [], "hello")
            wait_for(
                lambda: (
                    rows(db, "SELECT status FROM shadow_memory_runs WHERE id LIKE 'r_%'")[0]
                    == ("failed",)
                )
            )
    [(error,)] = rows(db, f"SELECT error FROM shadow_memory_runs WHERE session_id='{session}'")
    assert "interrupted" in error


class _At:
    """Enough of a Stack for ``ask``: a base URL."""

    def __init__(self, url: str, home: Path) -> None:
        self.url, self.home = url, home


async def test_a_run_cut_short_by_shutdown_is_not_blamed_on_the_user(tmp_path: Path) -> None:
    """Stopping ember cancels a running shadow call too: the run is recorded as interrupted
    by the shutdown, never as "interrupted by a user message" (nobody spoke)."""
    emulator = Emulator()
    answer = shadow_replies()

    def hanging(body: dict[str, Any], path: str) -> Reply | None:
        reply = answer(body, path)
        return None if reply is None else reply.replace(delay_headers=60)

    emulator.reply_fn = hanging
    with BackgroundServer(emulator) as up:
        settings = load_settings(
            env={}, home=tmp_path, anthropic_url=up.url, light_api_key="sk-ember-light"
        )
        storage = build_storage(settings)
        db = storage.database(PROJECT.db_path(tmp_path))
        db.write(cursors.activate)
        row = Row("m000000000001", "s", 1, 0, 0, "user", "user", "d0", "Remember: tabs.")
        db.write(lambda c: insert_rows(c, [row]))
        db.write(
            lambda c: c.execute(
                "INSERT INTO exchanges (ts, session_id, protocol, model, status, outcome, stream, "
                "usage_known, cost_usd, price_snapshot, latency_ms) "
                "VALUES (0, 's', 'anthropic', 'claude-sonnet-4-5', 200, 'ok', 1, 1, 100.0, 'x', 1)"
            )
        )
        upstream = Upstream.from_settings(settings)
        runner = ShadowRunner(
            settings,
            storage,
            upstream,
            lambda adapter, path, query: up.url + path,
            PrefixBook(),
            settings.price_table(),
        )
        task = asyncio.create_task(runner.run(RunRequest("s", 1, PROJECT, "idle", "anthropic")))
        for _ in range(200):
            if emulator.requests:
                break
            await asyncio.sleep(0.02)
        task.cancel()  # what the task set does when the app stops
        with pytest.raises(asyncio.CancelledError):
            await task
        await upstream.close()
        storage.flush(10)
        [(status, reason, error)] = db.read(
            lambda c: [
                tuple(r) for r in c.execute("SELECT status, reason, error FROM shadow_memory_runs")
            ]
        )
        assert status == "cancelled" and error == "interrupted-by-shutdown"
        assert "user" not in reason
        storage.close()
