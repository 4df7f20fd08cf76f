"""Shadow memory on PostgreSQL (issue #24): with ``store_url`` set, a hot run reads the
transcript from the project's schema, its proposal with valid evidence becomes a memory in
that schema, ``ember shadow`` and ``ember stats`` read it there, and the real proxy injects
the fact into a new session. Nothing is written to a file.

Against a real PostgreSQL with pgvector (``pg_url``); the model is the provider emulator,
proposing the fact the user stated (``ember.testing.shadow``)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.compose import shadow_library
from ember.config import load_settings
from ember.embedder import get_embedder
from ember.errors import StorageError
from ember.server import BackgroundServer
from ember.shadow.library import database_path
from ember.store.pg.names import schema_name
from ember.testing import Emulator
from ember.testing.shadow import shadow_replies
from tests.conftest import StackFactory
from tests.shadow.library_support import CWD as LIBRARY_CWD
from tests.shadow.library_support import Framework
from tests.shadow.test_e2e import FACT, ask, db_path, wait_for
from tests.shadow.test_library import INTRO

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def query(url: str, schema: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        conn.execute(f"SET search_path TO {schema}")
        return [tuple(r) for r in conn.execute(sql)]  # type: ignore[call-overload]


def ember(home: Path, *args: str, store_url: str | None) -> Any:
    """``ember <args> --json`` as a user runs it, the store URL in the environment."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(home), "EMBER_STORE_URL": store_url}
    out = CliRunner().invoke(cli, [*args, "--json"], env=env)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


async def test_a_hot_runs_valid_proposal_becomes_a_memory_in_the_projects_schema(
    pg_url: str, tmp_path: Path
) -> None:
    """The service end to end on a PgDatabase (library mode: no proxy): transcript, run,
    proposal, evidence and the promoted memory all land in the project's schema."""
    get_embedder()  # loaded once: promotion must not wait for the model
    emu = Emulator()
    emu.reply_fn = shadow_replies()
    with BackgroundServer(emu) as server:
        settings = load_settings(
            env={},
            home=tmp_path,
            store_url=pg_url,
            anthropic_url=server.url,
            openai_url=server.url + "/v1",
            shadow="primary",
            shadow_max_share=1.0,  # two-turn sessions: a shadow run costs about one turn
            shadow_idle_seconds=30.0,  # run_now below, never the idle timer
        )
        async with shadow_library(settings) as lib:
            app = Framework("anthropic", server.url, lib, "lib-pg", "claude-sonnet-4-5")
            await app.user(INTRO)
            await app.user(FACT)
            record = await lib.run_now("lib-pg")
            assert record is not None and record.status == "completed"
            schema = schema_name(tmp_path, database_path(settings, LIBRARY_CWD))

            def promoted() -> list[tuple[Any, ...]]:
                return query(
                    pg_url,
                    schema,
                    "SELECT p.content, p.validation_error, p.evidence, m.content "
                    "FROM shadow_fact_proposals p JOIN memories m ON m.id = p.memory_id",
                )

            await _wait(promoted)
    [(content, error, evidence, memory)] = promoted()
    assert "eu-west-1" in content and error is None and memory == content
    [pointer] = json.loads(evidence)
    [(kind, session)] = query(
        pg_url,
        schema,
        f"SELECT kind, session_id FROM transcript_messages WHERE id = '{pointer['messageId']}'",
    )
    assert (pointer["kind"], kind, session) == ("user-stated", "user", "lib-pg")
    [(path, status, cache_read)] = query(
        pg_url, schema, "SELECT path, status, cache_read_tokens FROM shadow_memory_runs"
    )
    assert (path, status) == ("hot", "completed") and cache_read > 0
    assert query(pg_url, schema, "SELECT kind FROM memory_evidence") == [("user-stated",)]
    origins = dict(query(pg_url, schema, "SELECT origin, COUNT(*) FROM exchanges GROUP BY 1"))
    assert origins == {"client": len(app.sent), "shadow": 1}
    assert not list(tmp_path.rglob("*.db"))  # nothing on file


async def _wait(found: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.1)


def test_the_proxy_injects_a_fact_its_shadow_stored_in_the_projects_schema(
    make_stack: StackFactory, pg_url: str
) -> None:
    """Session 1 states a fact through the real proxy; the shadow reads it hot and stores it
    in the project's schema; session 2 gets it injected. ``ember shadow`` and ``ember stats``
    read the same run, proposal and budget from the server."""
    get_embedder()
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=1.0, store_url=pg_url)
    stack.emulator.reply_fn = shadow_replies()
    schema = schema_name(stack.home, db_path(stack.home))
    history: list[dict[str, Any]] = []
    session = "0a0a0a0a-0000-4000-8000-00000000000a"
    ask(stack, session, history, "Let me tell you about this repo. " * 40)
    ask(stack, session, history, FACT)

    def promoted() -> list[tuple[Any, ...]]:
        return query(
            pg_url,
            schema,
            "SELECT p.memory_id FROM shadow_fact_proposals p JOIN memories m ON m.id = p.memory_id",
        )

    wait_for(promoted, timeout=30.0)
    [(memory_id,)] = promoted()
    ask(stack, "0b0b0b0b-0000-4000-8000-00000000000b", [], "Where does this project deploy to?")
    assert f"[{memory_id}]".encode() in stack.emulator.requests[-1].body
    stack.settle()
    assert not list(stack.home.rglob("*.db"))  # the project lives in its schema only

    cwd = ["--cwd", "/home/dev/shadow-project"]
    [run] = ember(stack.home, "shadow", "runs", *cwd, store_url=pg_url)
    assert (run["path"], run["status"], run["valid_proposals"]) == ("hot", "completed", 1)
    [proposal] = ember(stack.home, "shadow", "proposals", *cwd, store_url=pg_url)
    assert proposal["memory_id"] == memory_id and proposal["run_id"] == run["id"]
    report = ember(stack.home, "shadow", "compare", *cwd, store_url=pg_url)
    assert report["semantic"]["computed"] is False
    stats = ember(stack.home, "stats", *cwd, store_url=pg_url)
    assert stats["shadow_budget"]["spent"] > 0  # the run's call, read from the server
    # the file store knows nothing of it, and a read made no file
    assert ember(stack.home, "shadow", "runs", *cwd, store_url=None) == []
    assert not list(stack.home.rglob("*.db"))


def test_ember_shadow_on_a_project_with_no_schema_creates_none(pg_url: str, tmp_path: Path) -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(tmp_path), "EMBER_STORE_URL": pg_url}
    for args in (["runs"], ["proposals"], ["compare"]):
        out = CliRunner().invoke(cli, ["shadow", *args, "--project-id", "nope", "--json"], env=env)
        assert out.exit_code == 0, out.output
        assert "PostgreSQL schema ember_p_nope" in out.stderr and "does not exist" in out.stderr
    with psycopg.connect(pg_url) as conn:
        found = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ember_%'")
        assert found.fetchall() == []


def test_ember_shadow_with_an_unreachable_server_says_so_in_one_line(tmp_path: Path) -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    env |= {"EMBER_HOME": str(tmp_path), "EMBER_STORE_URL": "postgresql://ember@127.0.0.1:9/x"}
    out = CliRunner().invoke(cli, ["shadow", "runs", "--project-id", "acme"], env=env)
    assert isinstance(out.exception, StorageError)  # ember's main prints it as one line
    said = str(out.exception)
    assert "cannot be reached" in said and "store_url" in said and "\n" not in said
