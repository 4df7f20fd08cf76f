"""What output shaping costs: request-path latency, and what each effort rule costs the cache.

Three tables, each comparing alternatives side by side in one run:

1. **Stage cost, in-process.** For Claude-Code-like, Chat and Responses bodies: parse + serialise
   the body (what the proxy does anyway) vs the same plus ``ShapingStage.on_request`` (classify,
   block, effort routing, per-session bookkeeping). ``added`` is the difference at p50/p99.
2. **Proxy with vs without the stage.** The emulator and two proxies (stage on / no stage) as
   separate processes; the same JSON requests alternate between the proxies.
3. **Effort rules vs the prompt cache.** A 30-request Claude Code session with thinking
   (``budget_tokens`` 8000) and ``effort: high``, replayed through the emulator's cache model
   under each candidate rule, with one 6-minute idle inside a tool run. Input cost in units of
   the base input price (fresh 1x, cache write 1.25x, read 0.1x).

Every loop is bounded by a count; nothing leaves loopback.

    python bench/shaping_overhead.py [--iterations 2000] [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import anthropic

import ember.testing.prompt_anthropic as prompt_anthropic
from common import EMBER, process, wait_healthy
from ember.config import load_settings
from ember.exchange import Exchange
from ember.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from ember.protocols.base import ProtocolAdapter
from ember.protocols.jsonedit import JsonDoc
from ember.server import BackgroundServer, free_port
from ember.shaping.policy import TurnKind, classify_turn, params_broke_cache
from ember.shaping.stage import ShapingStage
from ember.testing import AnthropicCache, Emulator
from ember.testing.agent import ScriptedAgent, session_tasks
from ember.testing.tokens import canonical_json

HEADERS = {"content-type": "application/json", "x-api-key": "bench", "anthropic-version": "x"}


# -- bodies -------------------------------------------------------------------------------


def _history(kb: int, tool_turn: bool) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    turn = 0
    while len(json.dumps(history)) < kb * 1024:
        history.append(
            {"role": "user", "content": [{"type": "text", "text": f"step {turn} " + "x" * 400}]}
        )
        history.append({"role": "assistant", "content": [{"type": "text", "text": "ok " * 60}]})
        turn += 1
    if tool_turn:
        history.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}],
            }
        )
        last = {"type": "tool_result", "tool_use_id": "t", "content": "42 passed"}
    else:
        last = {"type": "text", "text": "go on"}
    history.append({"role": "user", "content": [{**last, "cache_control": {"type": "ephemeral"}}]})
    return history


def claude_body(kb: int, tool_turn: bool) -> bytes:
    """Key order as the anthropic SDK sends it: messages before system."""
    system = [
        {
            "type": "text",
            "text": "You are a coding agent. " * 100,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    return json.dumps(
        {
            "max_tokens": 1024,
            "messages": _history(kb, tool_turn),
            "metadata": {"user_id": "user_b_account_b_session_bench"},
            "model": "claude-sonnet-4-5",
            "output_config": {"effort": "high"},
            "system": system,
        }
    ).encode()


def chat_body(kb: int) -> bytes:
    msgs: list[dict[str, Any]] = [
        {"role": "developer", "content": "You are a coding agent. " * 100}
    ]
    while len(json.dumps(msgs)) < kb * 1024:
        msgs += [
            {"role": "user", "content": "x" * 400},
            {"role": "assistant", "content": "ok " * 60},
        ]
    msgs += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "42 passed"},
    ]
    return json.dumps({"model": "gpt-5", "messages": msgs, "reasoning_effort": "high"}).encode()


def responses_body(kb: int) -> bytes:
    items: list[dict[str, Any]] = []
    while len(json.dumps(items)) < kb * 1024:
        items += [
            {"role": "user", "content": "x" * 400},
            {"role": "assistant", "content": "ok " * 60},
        ]
    items += [
        {"type": "function_call", "call_id": "c", "name": "sh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "42 passed"},
    ]
    return json.dumps(
        {
            "model": "gpt-5",
            "instructions": "You are a coding agent. " * 100,
            "input": items,
            "reasoning": {"effort": "high"},
        }
    ).encode()


CASES: list[tuple[str, ProtocolAdapter, Callable[[], bytes]]] = [
    ("anthropic ask, 24 KiB", ANTHROPIC, lambda: claude_body(24, False)),
    ("anthropic tool turn, 24 KiB", ANTHROPIC, lambda: claude_body(24, True)),
    ("anthropic tool turn, 200 KiB", ANTHROPIC, lambda: claude_body(200, True)),
    ("chat tool turn, 24 KiB", OPENAI_CHAT, lambda: chat_body(24)),
    ("responses tool turn, 24 KiB", OPENAI_RESPONSES, lambda: responses_body(24)),
]


# -- 1. stage cost in-process ---------------------------------------------------------------


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000


async def _stage_cost(
    adapter: ProtocolAdapter, raw: bytes, n: int, stage: ShapingStage | None
) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        doc = JsonDoc(raw)
        if stage is not None:
            ex = Exchange(adapter, "/", "", {}, doc, "bench-session", None)
            await stage.on_request(ex)
        doc.to_bytes()
        out.append(time.perf_counter() - t)
    return out


def table_stage(n: int, home: Path) -> list[tuple[str, float]]:
    settings = load_settings(env={"EMBER_HOME": str(home)})
    print(f"\n1. shaping stage request-path cost, in-process, {n} iterations per cell\n")
    head = (
        f"{'body':30} {'no shaping p50':>14} {'shaping p50':>12} {'added p50':>10} "
        f"{'added p99':>10} {'ratio':>6}"
    )
    print(head + "\n" + "-" * len(head))
    rows = []
    for name, adapter, make in CASES:
        raw = make()
        stage = ShapingStage(settings)
        base, shaped = [], []
        for _ in range(4):  # interleave in rounds so drift hits both columns alike
            base += asyncio.run(_stage_cost(adapter, raw, n // 4, None))
            shaped += asyncio.run(_stage_cost(adapter, raw, n // 4, stage))
        added50, added99 = pct(shaped, 50) - pct(base, 50), pct(shaped, 99) - pct(base, 99)
        print(
            f"{name:30} {pct(base, 50):12.3f}ms {pct(shaped, 50):10.3f}ms {added50:8.3f}ms "
            f"{added99:8.3f}ms {pct(shaped, 50) / pct(base, 50):6.2f}"
        )
        rows.append((name, added50))
    return rows


# -- 2. proxy with vs without the stage -------------------------------------------------------

_PROXY = """
import sys
from ember.config import load_settings
from ember.compose import build_app
from ember.server import serve_forever
from ember.shaping.stage import ShapingStage
s = load_settings()
stages = [ShapingStage(s)] if sys.argv[2] == "on" else []
serve_forever(build_app(s, stages), "127.0.0.1", int(sys.argv[1]), "warning")
"""


async def _latencies(urls: dict[str, str], data: bytes, n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in urls}
    async with aiohttp.ClientSession() as s:
        for i in range(n + 20):
            order = list(urls.items())
            for name, url in order if i % 2 else order[::-1]:  # neither always goes first
                t = time.perf_counter()
                async with s.post(url + "/v1/messages", data=data, headers=HEADERS) as r:
                    await r.read()
                    assert r.status == 200, r.status
                if i >= 20:  # the first rounds warm connections and caches
                    out[name].append(time.perf_counter() - t)
    return out


async def table_proxy(n: int, home: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    up_port, on_port, off_port = free_port(), free_port(), free_port()
    up = f"http://127.0.0.1:{up_port}"
    env.update(EMBER_HOME=home, EMBER_ANTHROPIC_URL=up, EMBER_OPENAI_URL=up + "/v1")
    urls = {"no stage": f"http://127.0.0.1:{off_port}", "shaping": f"http://127.0.0.1:{on_port}"}
    with (
        process([EMBER, "dev", "upstream", "--port", str(up_port)], env),
        process([sys.executable, "-c", _PROXY, str(off_port), "off"], env),
        process([sys.executable, "-c", _PROXY, str(on_port), "on"], env),
    ):
        for url in (up, *urls.values()):
            await wait_healthy(url)
        print(
            "\n2. proxy with vs without the shaping stage, separate processes, "
            f"{n} requests each, alternating\n"
        )
        head = (
            f"{'request':30} {'no stage p50':>12} {'shaping p50':>12} {'added p50':>10} "
            f"{'paired':>8} {'no stage p99':>12} {'shaping p99':>12} {'ratio p50':>9}"
        )
        print(head + "\n" + "-" * len(head))
        for name, data in (
            ("anthropic ask, 24 KiB", claude_body(24, False)),
            ("anthropic tool turn, 24 KiB", claude_body(24, True)),
        ):
            lat = await _latencies(urls, data, n)
            a, b = lat["no stage"], lat["shaping"]
            added = pct(b, 50) - pct(a, 50)
            paired = pct([y - x for x, y in zip(a, b, strict=True)], 50)
            print(
                f"{name:30} {pct(a, 50):10.3f}ms {pct(b, 50):10.3f}ms {added:8.3f}ms "
                f"{paired:6.3f}ms {pct(a, 99):10.3f}ms {pct(b, 99):10.3f}ms "
                f"{pct(b, 50) / pct(a, 50):9.2f}"
            )
        print(
            "\npaired = median over rounds of (shaping - no stage) for back-to-back requests: "
            "less sensitive to\nmachine-wide drift than the difference of the two medians."
        )


# -- 3. effort rules vs the cache -------------------------------------------------------------

IDLE_BEFORE = 15  # request index (0-based) that arrives after a 6-minute tool run


def record_session() -> list[dict[str, Any]]:
    """The 30 request bodies of a Claude Code session with thinking and effort, as sent."""
    emulator = Emulator()
    with (
        BackgroundServer(emulator) as up,
        anthropic.Anthropic(base_url=up.url, api_key="k", max_retries=0) as client,
    ):
        agent = ScriptedAgent(
            client,
            emulator,
            thinking={"type": "enabled", "budget_tokens": 8000},
            output_config={"effort": "high"},
        )
        agent.run(session_tasks(30))
    return [r.json() for r in emulator.requests]


def _kinds(bodies: list[dict[str, Any]]) -> list[TurnKind]:
    return [classify_turn(ANTHROPIC.turn_parts(b)) for b in bodies]


def rule_budgets(rule: str, kinds: list[TurnKind]) -> list[bool]:
    """Which requests carry a clamped budget under each candidate rule."""
    mech = [k == TurnKind.MECHANICAL_CONTINUATION for k in kinds]
    if rule == "never":
        return [False] * len(kinds)
    if rule == "every mechanical turn":
        return mech
    if rule == "sticky once lowered":
        first = next((i for i, m in enumerate(mech) if m), len(mech))
        return [i >= first for i in range(len(mech))]
    # ember: start only when cold (after the idle), hold across the mechanical run
    out, held = [], False
    for i, m in enumerate(mech):
        held = m and (held or i == IDLE_BEFORE)
        out.append(held)
    return out


def replay(
    bodies: list[dict[str, Any]], clamped: list[bool], effort_low: list[bool], guard: bool
) -> tuple[int, int, int]:
    """Cache usage of the session under a rule; ``guard`` stops lowering effort after the
    first flip that the stage's cache guard (``params_broke_cache``) would catch."""
    cache, now = AnthropicCache(), 0.0
    read = write = fresh = 0
    prev_cached, prev_low, stopped = 0, False, False
    for i, (body, clamp, low) in enumerate(zip(bodies, clamped, effort_low, strict=True)):
        now += 400.0 if i == IDLE_BEFORE else 20.0
        low = low and not stopped
        b = copy.deepcopy(body)
        if clamp:
            b["thinking"]["budget_tokens"] = 1024
        if low:
            b["output_config"]["effort"] = "low"
        u = cache.evaluate(b, now, "k")
        if guard and params_broke_cache(
            prev_cached, u.cache_read_input_tokens, low != prev_low, i != IDLE_BEFORE
        ):
            stopped = True
        prev_cached = u.cache_read_input_tokens + u.cache_creation_input_tokens
        prev_low = low
        read += u.cache_read_input_tokens
        write += u.cache_creation_input_tokens
        fresh += u.input_tokens
    return read, write, fresh


Rule = tuple[str, list[bool], list[bool], bool, bool]


def _rules(kinds: list[TurnKind]) -> list[Rule]:
    """(name, clamped per request, effort lowered per request, effort in the key, guard)."""
    none = [False] * len(kinds)
    mech = [k == TurnKind.MECHANICAL_CONTINUATION for k in kinds]
    rules: list[Rule] = [
        (f"budget: {r}", rule_budgets(r, kinds), none, False, False)
        for r in ("never", "every mechanical turn", "sticky once lowered")
    ]
    rules.append(
        (
            "budget: cold start, held over the run (opt-in)",
            rule_budgets("ember", kinds),
            none,
            False,
            False,
        )
    )
    rules.append(("effort: lowered on mechanical turns", none, mech, False, False))
    rules.append(("effort: same, if effort were in the cache key", none, mech, True, False))
    rules.append(("effort: same, in the key, with ember's guard", none, mech, True, True))
    return rules


def table_rules() -> None:
    bodies = record_session()
    kinds = _kinds(bodies)
    print(
        f"\n3. effort rules vs the prompt cache: {len(bodies)}-request Claude Code session, "
        "thinking budget 8000, effort high,\n   one 6-minute idle inside a tool run\n"
    )
    head = (
        f"{'rule':50} {'changed':>7} {'cache read':>10} {'cache write':>11} "
        f"{'input cost':>10} {'vs never':>8}"
    )
    print(head + "\n" + "-" * len(head))
    base_cost = None
    original = prompt_anthropic._salt
    for name, clamped, low, in_key, guard in _rules(kinds):
        if in_key:
            prompt_anthropic._salt = _salt_with_effort  # type: ignore[assignment]
        try:
            read, write, fresh = replay(bodies, clamped, low, guard)
        finally:
            prompt_anthropic._salt = original  # type: ignore[assignment]
        cost = fresh + 1.25 * write + 0.1 * read
        base_cost = base_cost or cost
        changed = sum(clamped) + sum(low)
        print(f"{name:50} {changed:7} {read:10,} {write:11,} {cost:10,.0f} {cost / base_cost:8.2f}")
    print(
        "\ninput cost = fresh + 1.25 x write + 0.1 x read (tokens at the base input price); "
        "changed = requests\nwith a lowered field (guarded rows: planned, before the guard "
        "stops routing). A clamp pays only\nif the thinking it saves, at 5x (Sonnet "
        "output/input), exceeds its extra input cost."
    )


def _salt_with_effort(body: dict[str, Any]) -> bytes:
    return canonical_json(
        [body.get("tool_choice"), body.get("thinking"), body.get("output_config")]
    ).encode()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--iterations", type=int, default=2000, help="stage calls per cell (table 1)")
    p.add_argument("--requests", type=int, default=300, help="requests per proxy (table 2)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as home:
        rows = table_stage(args.iterations, Path(home))
        asyncio.run(table_proxy(args.requests, home))
        table_rules()
    worst = max(added for name, added in rows if "24 KiB" in name)
    verdict = "met" if worst <= 0.3 else "NOT met"
    print(f"\ntarget: shaping adds <= 0.3 ms p50 (24 KiB bodies): worst {worst:.3f} ms, {verdict}")


if __name__ == "__main__":
    main()
