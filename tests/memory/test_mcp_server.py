"""``ember mcp`` end to end: launched as a client launches it (``python -m ember mcp``, stdio),
driven by the official SDK's own client, the real embedder; then the fact it saved injected
by the real proxy into a new session of the same project.

The server runs in a subprocess with ``EMBER_HOME`` in the test's directory, this tree on its
``PYTHONPATH`` and the test run's model cache. Every wait is bounded (the SDK's read timeout,
``subprocess`` timeouts); HTTP is on loopback only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import ember
from ember.memory.mcp_tools import TOOLS
from tests.conftest import StackFactory
from tests.memory.mcp_support import call
from tests.memory.mcp_support import error as fails
from tests.memory.test_stage_e2e import memory_blocks, run_agent, sent

SRC = str(Path(ember.__file__).resolve().parents[1])
FACT = "The login handler in src/auth/login.py must reject an empty password with a 400."
PROTOCOL = "2025-11-25"


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """What the server subprocess gets on top of the SDK's safe defaults (PATH, HOME...)."""
    env = {"EMBER_HOME": str(home), "PYTHONPATH": SRC, "EMBER_LOG_LEVEL": "info"}
    if "XDG_CACHE_HOME" in os.environ:  # the test run's model cache (tests/conftest.py)
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    return env | extra


@asynccontextmanager
async def mcp_session(
    home: Path, *args: str, errlog: Path, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ember", "mcp", *args],
        env=server_env(home),
        cwd=cwd,
    )
    with errlog.open("a", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=120) as session,
        ):
            await session.initialize()
            yield session


def text(result: Any) -> Any:
    return json.loads(result.contents[0].text)


async def test_the_sdk_client_saves_finds_updates_lists_and_forgets(tmp_path: Path) -> None:
    project = tmp_path / "acme-api"
    project.mkdir()
    home, log = tmp_path / "home", tmp_path / "server.log"
    async with mcp_session(home, "--cwd", str(project), errlog=log) as session:
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == [
            "memory_search",
            "memory_save",
            "memory_update",
            "memory_forget",
            "memory_list",
        ]
        # Codex approves by these hints (`codex exec` refuses what it would have to ask about):
        # reads and additive writes run, forgetting stays behind the user's yes.
        hints = {t.name: t.annotations for t in listed.tools}
        assert all(h is not None and h.open_world_hint is False for h in hints.values())
        assert [n for n, h in hints.items() if h and h.read_only_hint] == [
            "memory_search",
            "memory_list",
        ]
        assert [n for n, h in hints.items() if h and h.destructive_hint] == ["memory_forget"]
        assert [n for n, h in hints.items() if h and not h.idempotent_hint] == ["memory_update"]
        saved = await call(
            session,
            "memory_save",
            facts=[{"content": FACT, "importance": 0.8, "category": "convention"}],
            user_stated=True,
        )
        [fact] = saved["saved"]
        found = await call(
            session,
            "memory_search",
            query="what should login do with an empty password?",
            explain=True,
        )
        [hit] = found["hits"]
        assert hit["id"] == fact["id"] and hit["content"] == FACT
        assert hit["explain"]["above_floor"] is True and hit["explain"]["cosine"] > 0.3
        assert hit["score"] >= found["floor"]

        updated = await call(session, "memory_update", id=fact["id"], content=FACT + " Always.")
        now = updated["now"]["id"]
        assert [m["id"] for m in (await call(session, "memory_list"))["memories"]] == [now]
        memories = text(await session.read_resource("ember://memories"))
        assert memories["project"] == str(project.resolve())
        assert [m["id"] for m in memories["memories"]] == [now]
        spend = text(await session.read_resource("ember://spend"))
        assert spend["requests"] == 0 and spend["by_origin"] == []

        assert "is empty" in await fails(session, "memory_save", facts=[{"content": " "}])
        outside = await fails(session, "memory_save", facts=[{"content": "x", "importance": 1.2}])
        assert "importance" in outside and "from 0 (trivia) to 1" in outside
        assert "no memory with id 'nope'" in await fails(session, "memory_forget", id="nope")

        assert (await call(session, "memory_forget", id=now))["forgotten"] == [now]
        assert (await call(session, "memory_list"))["memories"] == []
    assert "Traceback" not in log.read_text(encoding="utf-8")


async def test_a_fact_saved_over_mcp_is_injected_by_the_proxy_into_a_new_session(
    tmp_path: Path, make_stack: StackFactory
) -> None:
    project = (tmp_path / "acme-api").resolve()
    project.mkdir()
    home = tmp_path / "home"  # make_stack's EMBER_HOME
    async with mcp_session(home, errlog=tmp_path / "server.log", cwd=project) as session:
        saved = await call(session, "memory_save", facts=[{"content": FACT, "importance": 0.8}])
    stack = make_stack(stages="features")
    assert stack.home == home
    await anyio.to_thread.run_sync(lambda: run_agent(stack, cwd=str(project)))
    [block] = memory_blocks(sent(stack)[0]["messages"][0])
    assert f"[{saved['saved'][0]['id']}]" in block and "empty password" in block


def ember_mcp(
    home: Path, *args: str, cwd: Path | str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    return subprocess.run(
        [sys.executable, "-m", "ember", "mcp", *args],
        env=full | server_env(home, **env),
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_started_where_no_project_is_it_serves_nothing_and_says_why(
    tmp_path: Path,
) -> None:
    """A client that requires the server (Codex, as `ember setup codex --mcp` sets it up)
    must still start in the home directory: the server starts, with nothing to offer."""
    home, log = tmp_path / "home", tmp_path / "server.log"
    async with mcp_session(home, errlog=log, cwd=Path("/")) as session:
        assert (await session.list_tools()).tools == []
        assert (await session.list_resources()).resources == []
        said = await fails(session, "memory_search", query="deploys")
    assert "the working directory is the filesystem root" in said and "--cwd DIR" in said
    assert "no project to serve: the working directory is the filesystem root" in log.read_text()
    assert not home.exists()  # nothing was created


async def test_its_tools_are_listed_before_any_store_or_model_is_imported(
    tmp_path: Path,
) -> None:
    """A client waits for the tools before its first turn (``claude -p`` sends it without
    them when they come late): ``ember mcp`` lists them from their definitions alone, and the
    store, numpy and the model are imported by the first call that needs them."""
    project, log = tmp_path / "acme-api", tmp_path / "server.log"
    project.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-X", "importtime", "-m", "ember", "mcp"],
        env=server_env(tmp_path / "home"),
        cwd=project,
    )
    with log.open("a", encoding="utf-8") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=120) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
    assert [t.name for t in listed.tools] == [t.name for t in TOOLS]
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in log.read_text().splitlines()
        if line.startswith("import time:")
    }
    assert {"mcp.server", "ember.memory.mcp_server"} <= imported  # what was imported is seen
    heavy = {"numpy", "onnxruntime", "ember.memory.core", "ember.memory.mcp_memory"}
    assert not imported & heavy


def test_a_project_the_user_named_wrong_is_refused_at_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    typo = ember_mcp(home, "--cwd", str(tmp_path / "typo"), cwd=tmp_path)
    assert typo.returncode == 2 and typo.stdout == "" and "is not a directory" in typo.stderr
    assert not home.exists()


def test_stdout_carries_the_protocol_and_nothing_else(tmp_path: Path) -> None:
    """Every line on stdout is a JSON-RPC message, also while the embedder loads and logs."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"facts": [{"content": FACT}]}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "empty password"}},
        },
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember", "mcp"],
        env=env | server_env(tmp_path / "home"),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, proc.kill)  # bounded: a hung server is killed
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:  # a request: wait for its answer before the next one
                answers.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        rest, err = proc.stdout.read(), proc.stderr.read() if proc.stderr else ""
        assert proc.wait(timeout=60) == 0, err
    finally:
        watchdog.cancel()
        proc.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=30)
    assert rest == ""  # nothing after the answers either
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[0]["result"]["serverInfo"]["name"] == "ember"
    saved = json.loads(answers[1]["result"]["content"][0]["text"])
    assert saved["saved"][0]["content"] == FACT
    found = json.loads(answers[2]["result"]["content"][0]["text"])
    assert [h["content"] for h in found["hits"]] == [FACT]
    assert "embedder" in err  # the model's load was logged, on stderr


def test_a_non_loopback_host_is_refused(tmp_path: Path) -> None:
    refused = ember_mcp(tmp_path / "home", "--http", "--host", "0.0.0.0", cwd=tmp_path)
    assert refused.returncode == 2 and "not a loopback address" in refused.stderr


@pytest.mark.parametrize("args", [("--port", "9999")])
def test_port_without_http_is_a_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    refused = ember_mcp(tmp_path / "home", *args, cwd=tmp_path)
    assert refused.returncode == 2 and "--port is for --http" in refused.stderr
