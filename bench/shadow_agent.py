"""A Claude-Code-like session for ``bench/shadow_cost.py``, and reading what the proxy recorded.

The session speaks raw Anthropic Messages over aiohttp, as Claude Code does on the wire: the
scripted agent's system prompt (its ``<env>`` block names the working directory, which makes
the project) and tools, a session id in ``metadata.user_id``, and a ``cache_control``
breakpoint on the last system block and on the last block of the latest message. Every answer
is appended exactly as received, so each request extends the previous one (one thread, one
generation), and tool calls are answered with file contents of a chosen size.

``cached=False`` sends the same conversation with no breakpoint at all: the provider caches
nothing of it, so ember cannot fork it hot and its shadow takes the cold path (the light model
reading rendered pages) — the same backlog, read the other way.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from ember.project import resolve_project
from ember.store import driver
from ember.testing.agent import TOOLS, system_prompt
from ember.testing.tokens import count_tokens

MODEL = "claude-sonnet-4-5"
HEADERS = {
    "content-type": "application/json",
    "x-api-key": "sk-bench",
    "anthropic-version": "2023-06-01",
}


def file_text(path: str, tokens: int) -> str:
    """A source file of about ``tokens`` tokens (the emulator's tokenizer)."""
    lines: list[str] = []
    used = 0
    while used < tokens:
        n = len(lines) + 1
        line = f"{n:5} | def step_{n}(value): return transform(value, {n})  # {path}"
        lines.append(line)
        used += count_tokens(line)
    return "\n".join(lines)


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


@dataclass
class AgentSession:
    http: aiohttp.ClientSession
    url: str
    session_id: str
    cwd: str
    cached: bool = True
    result_tokens: int = 1500
    history: list[dict[str, Any]] = field(default_factory=list)
    #: total input tokens of the latest request (fresh + cache read + cache write)
    last_input: int = 0
    latencies: list[float] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        messages = copy.deepcopy(self.history)
        system: Any = system_prompt(self.cwd)
        if self.cached:
            messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        else:
            system = _strip_cache_control(system)
        return {
            "model": MODEL,
            "max_tokens": 4096,
            "system": system,
            "tools": TOOLS,
            "messages": messages,
            "metadata": {"user_id": f"user_bench_account_bench_session_{self.session_id}"},
        }

    async def send(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request with ``message`` appended; the answer is appended as received."""
        self.history.append(message)
        started = time.perf_counter()
        async with self.http.post(
            self.url + "/v1/messages", json=self.body(), headers=HEADERS
        ) as r:
            answer: dict[str, Any] = await r.json()
            if r.status != 200:
                raise RuntimeError(f"the proxy answered {r.status}: {answer}")
        self.latencies.append(time.perf_counter() - started)
        self.history.append({"role": "assistant", "content": answer["content"]})
        u = answer["usage"]
        self.last_input = (
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        )
        return answer

    async def turn(self, ask: str) -> int:
        """The user's ask and every tool call it leads to; returns the requests made."""
        answer = await self.send({"role": "user", "content": [{"type": "text", "text": ask}]})
        requests = 1
        while answer.get("stop_reason") == "tool_use":
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": b["id"],
                    "content": file_text(b["input"]["path"], self.result_tokens),
                }
                for b in answer["content"]
                if b["type"] == "tool_use"
            ]
            answer = await self.send({"role": "user", "content": results})
            requests += 1
        return requests


def ask_text(step: int, tools: int, remember: bool = True) -> str:
    """With ``remember``, every other ask states something worth remembering (the emulated
    model proposes it as a fact)."""
    lead = (
        f"Remember that module {step} keeps its public API stable; reviews depend on it. "
        if remember and step % 2 == 0
        else ""
    )
    task = f"Step {step}: module {step} fails its checks. Find out why and fix it."
    return f"{lead}{task} [tools {tools}]"


async def grow(session: AgentSession, target_tokens: int, step: int = 0) -> int:
    """A first ask answered without tools, then turns of up to four tool calls until the
    session's prompt reaches about ``target_tokens``; returns the next step number."""
    if not session.history:
        await session.turn(ask_text(step, 0))
        step += 1
    while (left := target_tokens - session.last_input) > session.result_tokens // 2:
        tools = max(1, min(4, round(left / session.result_tokens)))
        await session.turn(ask_text(step, tools))
        step += 1
    return step


# -- what the proxy recorded ----------------------------------------------------------------------


def project_db(home: Path, cwd: str) -> Path:
    ref = resolve_project({}, None, f"Working directory: {cwd}")
    assert ref is not None
    return ref.db_path(home)


def query(db: Path, sql: str, *params: Any) -> list[Any]:
    """Rows read from a project database the proxy writes (read-only, never blocking it)."""
    if not db.exists():
        return []
    conn = driver.connect(db, readonly=True).conn
    try:
        return list(conn.execute(sql, params))
    except driver.errors.OperationalError:
        return []  # the schema is not there yet
    finally:
        conn.close()
