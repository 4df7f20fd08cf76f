"""``ember mcp --http``: every request needs the server's bearer token (the one printed at start,
or ``mcp_token``), names a served Host and, from a web page, a served Origin; the official
``mcp`` client with the token is served. Launched as a user launches it, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ember.server import free_port
from tests.memory.mcp_support import call
from tests.memory.test_mcp_server import PROTOCOL, server_env

TOKEN = "the-mcp-token-of-this-test-012345"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"accept": "application/json, text/event-stream"}


@dataclass
class Served:
    url: str
    port: int
    said: list[str]  #: stderr up to the line that says how to connect
    proc: subprocess.Popen[str]

    @property
    def token(self) -> str:
        [line] = [s for s in self.said if "every request needs the header" in s]
        return line.rsplit("Bearer ", 1)[1].strip()


@contextmanager
def ember_mcp_http(tmp_path: Path, **env: str) -> Iterator[Served]:
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember", "mcp", "--http", "--port", str(port)],
        env=clean | server_env(tmp_path / "home", **env),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said: list[str] = []
        assert proc.stderr is not None
        while not said or "the token" not in said[-1]:
            line = proc.stderr.readline()
            assert line, f"ember mcp ended before it said how to connect: {said}"
            said.append(line.rstrip("\n"))
        served = Served(f"http://127.0.0.1:{port}/mcp", port, said, proc)
        wait_until_listening(served)
        yield served
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        assert out == ""  # stdout carries nothing over HTTP either


def wait_until_listening(served: Served) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(served.url, timeout=5)
            return
        except httpx2.TransportError:
            assert time.monotonic() < deadline and served.proc.poll() is None
            time.sleep(0.1)


def initialize(served: Served, **headers: str) -> httpx2.Response:
    return httpx2.post(served.url, json=INITIALIZE, headers=ACCEPT | headers, timeout=10)


def test_without_its_token_nothing_is_served_and_with_it_the_handshake_is(
    tmp_path: Path,
) -> None:
    with ember_mcp_http(tmp_path) as served:
        token = served.token
        assert len(token) >= 32
        assert any(f'--header "Authorization: Bearer {token}"' in s for s in served.said)
        assert any("set mcp_token (EMBER_MCP_TOKEN)" in s for s in served.said)
        bare = initialize(served)
        assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")
        error = bare.json()["error"]
        assert (
            "token is missing" in error["message"] and "Authorization: Bearer" in error["message"]
        )
        wrong = initialize(served, authorization="Bearer " + token[:-1] + "x")
        assert wrong.status_code == 401 and "does not match" in wrong.text
        assert token not in wrong.text
        auth = {"authorization": f"Bearer {token}"}
        rebound = initialize(served, **auth, host=f"evil.example:{served.port}")
        assert rebound.status_code == 421 and "is not ember mcp's" in rebound.text
        page = initialize(served, **auth, origin="http://evil.example")
        assert page.status_code == 403 and "'http://evil.example'" in page.text
        ok = initialize(served, **auth)
        assert ok.status_code == 200 and "serverInfo" in ok.text
        assert initialize(served, **auth, host=f"localhost:{served.port}").status_code == 200


async def test_the_official_client_with_the_token_lists_and_calls_the_tools(
    tmp_path: Path,
) -> None:
    with ember_mcp_http(tmp_path, EMBER_MCP_TOKEN=TOKEN) as served:
        assert not any(TOKEN in s for s in served.said)  # the user's own token is not shown
        assert any("Bearer $EMBER_MCP_TOKEN" in s for s in served.said)
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(served.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            assert "memory_forget" in [t.name for t in listed.tools]
            assert (await call(session, "memory_list"))["memories"] == []


async def test_the_official_client_without_the_token_gets_no_session(tmp_path: Path) -> None:
    with ember_mcp_http(tmp_path, EMBER_MCP_TOKEN=TOKEN) as served:
        with pytest.raises(Exception) as refused:
            async with (
                httpx2.AsyncClient(timeout=30) as http,
                streamable_http_client(served.url, http_client=http) as (read, write),
                ClientSession(read, write, read_timeout_seconds=30) as session,
            ):
                await session.initialize()
        # the client reads the refusal as a JSON-RPC error, and shows what it says
        assert refused.group_contains(MCPError, match="token is missing")


def test_a_token_too_short_stops_it_at_start(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    done = subprocess.run(
        [sys.executable, "-m", "ember", "mcp", "--http", "--port", str(free_port())],
        env=clean | server_env(tmp_path / "home", EMBER_MCP_TOKEN="short"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "EMBER_MCP_TOKEN: " in done.stderr and "at least 16 characters" in done.stderr
    assert "'short'" not in done.stderr  # a secret, even a bad one, is not echoed
