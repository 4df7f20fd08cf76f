"""Requests recorded from the real agent CLIs (Claude Code, Codex, OpenCode, Gemini CLI, Qwen
Code, aider), for tests.

The fixtures live in ``tests/fixtures/clients/<client>/<scenario>/NNN-<kind>.json`` (method,
path, query, scrubbed headers, status, arrival time) with the exact body bytes beside it in
``NNN-<kind>.body``; ``tests/fixtures/clients/README.md`` says how they were recorded and lists
every request. ``scripts/record_client_fixtures.py`` re-records Claude Code's and Codex's,
``scripts/record_agent_clients.py`` the others'.

Kinds: ``main`` (a main-thread turn), ``subagent``, ``title`` (title generation),
``compaction``, ``memory`` (Qwen Code's managed-memory extraction), ``router`` (Gemini CLI's
model routing call), ``probe`` (Claude Code's ``HEAD /`` connectivity check) and
``websocket-attempt`` (Codex's ``GET /v1/responses`` upgrade). Within a scenario every request
of the session carries the same scrubbed session id; the project directory is always
``/work/proj`` and the home directory ``/home/user``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "clients"
PROJECT_DIR = "/work/proj"
CLIENTS = ("aider", "claude-code", "codex", "gemini-cli", "opencode", "qwen-code")
#: The kind of thread ember gives each recorded kind (compaction is the main thread's).
THREAD_KIND = {
    "main": "main",
    "compaction": "main",
    "subagent": "subagent",
    "title": "side",
    "memory": "side",
    "router": "side",
}


@dataclass(frozen=True)
class ClientRequest:
    """One recorded request, as the client sent it (only ids, keys and paths scrubbed)."""

    client: str
    scenario: str
    index: int
    kind: str
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    status: int
    t_ms: int

    @property
    def name(self) -> str:
        return f"{self.client}/{self.scenario}/{self.index:03d}-{self.kind}"

    @property
    def is_model_call(self) -> bool:
        """A POST that asks the model for an answer (not a probe or a WebSocket upgrade)."""
        return self.method == "POST" and bool(self.body)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def wrapped_headers(self) -> dict[str, str]:
        """The headers as the request reaches ember under ``ember wrap``: aider's requests name
        no directory and no session, so the wrap sends both (``ember.clients.aider``); the
        other clients' are as recorded."""
        headers = dict(self.headers)
        if self.client == "aider":
            headers["x-ember-cwd"] = PROJECT_DIR
            headers["x-ember-session-id"] = f"aider-{self.scenario}"
        return headers

    def session_id(self) -> str | None:
        """The client's own session id: Claude Code's ``metadata.user_id`` JSON, Codex's
        ``prompt_cache_key``, OpenCode's ``x-session-id`` header; None for a client that
        names none (Gemini CLI, Qwen Code, aider)."""
        body = self.json()
        user_id = (body.get("metadata") or {}).get("user_id")
        if isinstance(user_id, str) and user_id.startswith("{"):
            sid = json.loads(user_id).get("session_id")
            return str(sid) if sid else None
        key = body.get("prompt_cache_key") or self.headers.get("x-session-id")
        return str(key) if key else None


def _load(meta_file: Path) -> ClientRequest:
    meta = json.loads(meta_file.read_text())
    index, kind = meta_file.stem.split("-", 1)
    body_file = meta_file.with_suffix(".body")
    return ClientRequest(
        client=meta_file.parent.parent.name,
        scenario=meta_file.parent.name,
        index=int(index),
        kind=kind,
        method=meta["method"],
        path=meta["path"],
        query=meta["query"],
        headers=meta["headers"],
        body=body_file.read_bytes() if body_file.exists() else b"",
        status=meta["status"],
        t_ms=meta["t_ms"],
    )


def scenarios(client: str | None = None) -> list[tuple[str, str]]:
    """Every recorded ``(client, scenario)``, sorted."""
    found = [
        (d.parent.name, d.name)
        for d in FIXTURES.glob("*/*")
        if d.is_dir() and (client is None or d.parent.name == client)
    ]
    return sorted(found)


def load_scenario(client: str, scenario: str) -> list[ClientRequest]:
    """The requests of one scenario, in the order they arrived."""
    folder = FIXTURES / client / scenario
    if not folder.is_dir():
        raise FileNotFoundError(f"no recorded scenario {client}/{scenario} under {FIXTURES}")
    return [_load(f) for f in sorted(folder.glob("*.json"))]


def all_requests() -> list[ClientRequest]:
    return [r for client, name in scenarios() for r in load_scenario(client, name)]
