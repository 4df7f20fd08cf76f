"""Several agents at once against one base URL: the soak tests' and benchmarks' load.

Each agent is a thread with its own official SDK client and its own session, talking like a
coding agent about one project (the working directory in the system prompt, a session id in
the metadata): every turn is a new ask carrying the conversation so far, alternately as a
JSON request and as a stream; every third agent speaks OpenAI Chat instead of Anthropic.

Bounded by construction: a fixed number of turns per agent, a client timeout per request and a
wall-clock deadline for the whole run, after which agents stop at their next turn.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic

from ember.testing.agent import TOOLS, system_prompt

ASKS: Sequence[str] = (
    "Which database does this project use, and where is it configured?",
    "Why does the login endpoint return 500 when the password is empty?",
    "Where does the project deploy to, and how are releases cut?",
    "Add a regression test for the empty password case.",
    "How do we run the test suite locally?",
    "Summarise what changed today in one line.",
)


@dataclass
class LoadResult:
    answered: int = 0
    failed: int = 0
    #: seconds per answered request, in completion order
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: ``time.monotonic()`` when each answer was complete (for durability windows)
    answered_at: list[float] = field(default_factory=list)
    asks: int = 0


@dataclass(frozen=True)
class LoadPlan:
    agents: int = 4
    turns: int = 10
    cwd: str = "/home/dev/soak-project"
    session_prefix: str = "soak"
    deadline_seconds: float = 120.0
    timeout_seconds: float = 30.0


def run_agents(base_url: str, plan: LoadPlan) -> LoadResult:
    """Run ``plan.agents`` agents of ``plan.turns`` turns each against ``base_url`` (the proxy
    or the provider directly); returns what was answered."""
    result = LoadResult()
    lock = threading.Lock()
    deadline = time.monotonic() + plan.deadline_seconds
    threads = [
        threading.Thread(
            target=_agent, args=(base_url, plan, i, deadline, result, lock), daemon=True
        )
        for i in range(plan.agents)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + plan.timeout_seconds)
    return result


def session_id(plan: LoadPlan, index: int) -> str:
    """The session id agent ``index`` of ``plan`` sends: a UUID, as Claude Code's are (the
    proxy reads them from the metadata), the same in every run of the same plan."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ember-load/{plan.session_prefix}/{index}"))


def _agent(
    base_url: str,
    plan: LoadPlan,
    index: int,
    deadline: float,
    result: LoadResult,
    lock: threading.Lock,
) -> None:
    session = session_id(plan, index)
    speak = _openai_turn if index % 3 == 2 else _anthropic_turn
    client = _client(base_url, plan, index % 3 == 2)
    history: list[dict[str, Any]] = []
    try:
        for turn in range(plan.turns):
            if time.monotonic() >= deadline:
                return
            ask = f"{ASKS[(index + turn) % len(ASKS)]} (agent {index}, turn {turn})"
            history.append({"role": "user", "content": ask})
            started = time.monotonic()
            try:
                answer = speak(client, plan, session, history, stream=turn % 2 == 1)
            except Exception as exc:  # the load goes on; the failure is counted and kept
                history.pop()
                with lock:
                    result.failed += 1
                    result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            history.append({"role": "assistant", "content": answer})
            done = time.monotonic()
            with lock:
                result.answered += 1
                result.asks += 1
                result.latencies.append(done - started)
                result.answered_at.append(done)
    finally:
        client.close()


def _client(base_url: str, plan: LoadPlan, openai_side: bool) -> Any:
    if openai_side:
        import openai

        return openai.OpenAI(
            base_url=base_url + "/v1",
            api_key="sk-load-not-real",
            max_retries=0,
            timeout=plan.timeout_seconds,
        )
    return anthropic.Anthropic(
        base_url=base_url,
        api_key="sk-load-not-real",
        max_retries=0,
        timeout=plan.timeout_seconds,
    )


def _anthropic_turn(
    client: anthropic.Anthropic,
    plan: LoadPlan,
    session: str,
    history: list[dict[str, Any]],
    *,
    stream: bool,
) -> str:
    args: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": system_prompt(plan.cwd),
        "tools": TOOLS,
        "messages": history,
        "metadata": {"user_id": f"user_load_account_load_session_{session}"},
    }
    if stream:
        with client.messages.stream(**args) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**args)
    return "".join(getattr(b, "text", "") for b in message.content) or "(no text)"


def _openai_turn(
    client: Any,
    plan: LoadPlan,
    session: str,
    history: list[dict[str, Any]],
    *,
    stream: bool,
) -> str:
    system = "\n".join(b["text"] for b in system_prompt(plan.cwd))
    messages = [{"role": "system", "content": system}, *history]
    extra = {"prompt_cache_key": session}
    if stream:
        parts: list[str] = []
        chunks = client.chat.completions.create(
            model="gpt-5.1",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        return "".join(parts) or "(no text)"
    reply = client.chat.completions.create(model="gpt-5.1", messages=messages, extra_body=extra)
    return str(reply.choices[0].message.content or "(no text)")
