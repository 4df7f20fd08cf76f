"""What ember saves on a tool-heavy agent session, net of everything it spends: direct vs ember.

One Claude-Code-shaped session (the official ``anthropic`` SDK, streaming, ``cache_control`` on
the last block as Claude Code marks it) of 16 requests: a 600-line pytest run with one failure,
400 orders of an API, 300 search hits, a 500-file tree, a 400-line build with three warnings, a
source file read before an edit, then small edit and test turns and follow-up questions. The
emulated model plays the same part in both legs; through ember it also asks ``ember_retrieve``
once for records that were left out (what a retrieval costs is in the ledger).

- **direct**: the client talks to the provider emulator itself;
- **ember**: the same session through ``ember proxy`` with its shipped defaults (shaping,
  memory with a few facts to inject, shadow memory — its read runs and is paid —, traffic
  learning, compression), everything it spent counted from its own accounting rows (the
  session's requests, the hidden retrieval round, the shadow read).

Costs are at list prices (``ember.prices``) from the provider's usage. Printed: cost per leg
and the ratio, the cache-read share, the checks that what the agent acts on reached the model
byte for byte (the failing test and its assertion, the order asked about, every warning, the odd
record, the read file), the reported net (``ember stats --json`` ``savings``, when the ledger is
there) against the measured one, and the CPU one shortening takes on a 50 KB output.

    python bench/savings.py [--fixtures] [--keep]

``--fixtures`` also replays each Claude Code session recorded in ``tests/fixtures/clients``
(real request bodies: short sessions with small tool outputs) direct and through ember, to show
what ember costs where there is little to shorten.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic

from common import EMBER, process, proxy_cmd, wait_healthy
from ember.prices import PriceTable
from ember.protocols.base import Usage
from ember.server import BackgroundServer, free_port
from ember.testing import Emulator
from ember.testing.agent import TOOLS, system_prompt
from ember.testing.replies import Reply
from ember.testing.shadow import question_of, shadow_replies
from ember.testing.tool_outputs import (
    Output,
    build_log,
    file_tree,
    grep_hits,
    orders_json,
    pytest_log,
    source_file,
)

MODEL = "claude-sonnet-4-5"
CWD = "/home/dev/shop"
ASK = (
    "The refund test fails. Find out why and fix it. While you are at it, check what the "
    "orders API returns for ORD-10217, where order totals are computed, and whether the "
    "release build has warnings."
)
#: The agent's part, request by request: (what the user says, or None for a tool result) and
#: the model's reply to it. Outputs come back as tool results of the call before them.
OUTPUTS = {
    "pytest": pytest_log(),
    "orders": orders_json(),
    "grep": grep_hits(),
    "tree": file_tree(),
    "build": build_log(),
    "read": source_file(),
}
SMALL = {"edit": "The file was edited.", "test": "1 passed in 0.21s", "build2": "Finished"}


def script() -> list[tuple[str | None, Reply, str | None]]:
    """(user text or None, the model's reply, the tool output that answers the reply)."""
    call = Reply.tool_use

    def ask(name: str) -> Reply:
        return call(OUTPUTS[name].tool, OUTPUTS[name].arguments)

    return [
        (ASK, ask("pytest"), "pytest"),
        (None, ask("orders"), "orders"),
        (None, ask("grep"), "grep"),
        (None, ask("tree"), "tree"),
        (None, ask("build"), "build"),
        (None, ask("read"), "read"),
        (None, call("Edit", {"file_path": "refund.py", "old": "ROUND_DOWN"}), "edit"),
        (None, call("Bash", {"command": "pytest tests/test_billing.py -k refund"}), "test"),
        (None, Reply("Fixed: the refund rounded down; it now rounds half up. 1 passed."), None),
        (
            "Thanks. Fix the unused variable warning too.",
            call("Edit", {"file_path": "sync.rs"}),
            "edit",
        ),
        (None, call("Bash", {"command": "cargo build --release"}), "build2"),
        (None, Reply("The warning is gone; the build is clean apart from the bundle size."), None),
        ("Which orders were refunded?", Reply("RETRIEVE"), None),
        ("What was ORD-10217's total?", Reply("ORD-10217 totals what the API said."), None),
        (
            "Run the billing tests once more.",
            call("Bash", {"command": "pytest tests/test_billing.py"}),
            "test",
        ),
        (None, Reply("All billing tests pass."), None),
    ]


class Model:
    """The emulated model's part: the reply for a request is chosen by how many model turns
    its conversation already holds, so both legs get the same answers."""

    def __init__(self) -> None:
        self.steps = script()
        self.shadow = shadow_replies()
        self.retrieved = False

    def reply(self, body: dict[str, Any], path: str) -> Reply | None:
        if question_of(body) is not None:
            return self.shadow(body, path)
        messages = body.get("messages", [])
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        if _is_retrieval_result(messages):
            return Reply("ORD-10173 was refunded (the one refunded order of 400).")
        if turns >= len(self.steps):
            return Reply("Done.")
        reply = self.steps[turns][1]
        if reply.text == "RETRIEVE":
            tools = {t.get("name") for t in body.get("tools", [])}
            if "ember_retrieve" in tools and not self.retrieved:
                self.retrieved = True
                ref = _ref_in(messages, "records")
                return Reply.tool_use("ember_retrieve", {"ref": ref, "query": "refunded"})
            return Reply("ORD-10173 was refunded (the one refunded order of 400).")
        return reply


def _is_retrieval_result(messages: list[dict[str, Any]]) -> bool:
    """The request continues ember's hidden round: its last call was ``ember_retrieve``."""
    if len(messages) < 2 or not isinstance(messages[-2].get("content"), list):
        return False
    names = [b.get("name") for b in messages[-2]["content"] if isinstance(b, dict)]
    return "ember_retrieve" in names


def _ref_in(messages: list[dict[str, Any]], kind: str) -> str:
    for m in messages:
        for b in m.get("content", []) if isinstance(m.get("content"), list) else []:
            text = str(b.get("content", "")) if isinstance(b, dict) else ""
            if kind in text and "ember_retrieve ref=" in text:
                return text.split("ember_retrieve ref=")[1].split()[0]
    return "c0000000000"


def run_session(base_url: str, session: str) -> list[Any]:
    """The 16 requests; returns each answer's usage."""
    history: list[dict[str, Any]] = []
    usages = []
    headers = {"x-ember-cwd": CWD} if "ember" in session else {}
    with anthropic.Anthropic(
        base_url=base_url, api_key="sk-bench", max_retries=0, default_headers=headers
    ) as client:
        pending: str | None = None
        for user, _, output in script():
            if user is not None:
                content: Any = [{"type": "text", "text": user}]
            else:
                calls = [b for b in history[-1]["content"] if b["type"] == "tool_use"]
                if not calls:
                    raise RuntimeError(f"no tool call at request {len(usages)}: {history[-1]}")
                tool = calls[-1]
                text = OUTPUTS[pending].text if pending in OUTPUTS else SMALL[pending or "edit"]
                content = [{"type": "tool_result", "tool_use_id": tool["id"], "content": text}]
            for m in history:  # Claude Code marks only the latest message
                for b in m["content"] if isinstance(m["content"], list) else []:
                    b.pop("cache_control", None)
            content[-1]["cache_control"] = {"type": "ephemeral"}
            history.append({"role": "user", "content": content})
            with client.messages.stream(
                model=MODEL,
                max_tokens=2048,
                system=system_prompt(CWD),
                tools=TOOLS + EXTRA_TOOLS,
                messages=history,
                metadata={"user_id": f"user_bench_account_x_session_{session}"},
            ) as s:
                msg = s.get_final_message()
            usages.append(msg.usage)
            history.append(
                {
                    "role": "assistant",
                    "content": [b.model_dump(exclude_none=True) for b in msg.content],
                }
            )
            pending = output
    return usages


#: Claude Code's search tools (their outputs are regrouped).
EXTRA_TOOLS = [
    {"name": n, "description": f"{n} files. " * 20, "input_schema": {"type": "object"}}
    for n in ("Grep", "Glob")
]


def cost(usages: list[Any], prices: PriceTable) -> tuple[float, float]:
    """(dollars, cache-read share of input) of the client's requests."""
    total = 0.0
    read = inp = 0
    for u in usages:
        usage = Usage(
            u.input_tokens,
            u.cache_read_input_tokens or 0,
            u.cache_creation_input_tokens or 0,
            0,
            u.output_tokens,
        )
        total += prices.cost(MODEL, usage) or 0.0
        read += usage.cache_read_tokens
        inp += usage.total_input_tokens
    return total, read / inp if inp else 0.0


def ember_spend(home: Path) -> dict[str, float]:
    """Dollars by origin from ember's own accounting rows (every call it made or relayed)."""
    from ember.project import resolve_project
    from ember.store.driver import connect

    ref = resolve_project({"x-ember-cwd": CWD})
    assert ref is not None
    conn = connect(ref.db_path(home), readonly=True).conn
    try:
        rows = conn.execute(
            "SELECT origin, SUM(cost_usd) FROM exchanges GROUP BY origin"
        ).fetchall()
    finally:
        conn.close()
    return {str(o): float(c or 0.0) for o, c in rows}


def survived(emu: Emulator, session: str) -> dict[str, bool]:
    """Whether each must-keep line reached the model through ember, byte for byte, in the
    request that first carried its output (found by the call that asked for it)."""
    bodies = [json.loads(r.body) for r in emu.requests if session.encode() in r.body]
    out = {}
    for name, o in OUTPUTS.items():
        sent = _first_result(bodies, o)
        out[name] = sent is not None and all(k in sent for k in o.must_keep)
    return out


def _first_result(bodies: list[dict[str, Any]], output: Output) -> str | None:
    """The text of the tool result that answered ``output``'s call, as the model got it."""
    for body in bodies:
        calls = {
            b.get("id"): b.get("input")
            for m in body.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        }
        for m in body.get("messages", []):
            for b in m["content"] if isinstance(m.get("content"), list) else []:
                if (
                    b.get("type") == "tool_result"
                    and calls.get(b["tool_use_id"]) == output.arguments
                ):
                    return str(b["content"])
    return None


def shorten_cpu(samples: int = 50) -> float:
    """Median milliseconds to judge and shorten a 50 KB log (the pytest run, grown)."""
    from ember.compress.policy import judge, terms_of
    from ember.compress.shorten import shorten

    text = pytest_log(900).text
    times = []
    for _ in range(samples):
        start = time.process_time()
        v = judge(
            "Bash",
            {"command": "pytest -v"},
            text,
            is_error=False,
            min_chars=6000,
            policies={},
            retrievable=True,
        )
        assert v.how is not None
        shorten(text, v.how, "c0123456789", terms_of(ASK))
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


async def _healthy(url: str) -> None:
    await wait_healthy(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the ember home (printed)")
    parser.add_argument(
        "--fixtures",
        action="store_true",
        help="also replay the Claude Code sessions recorded in tests/fixtures/clients",
    )
    args = parser.parse_args()
    prices = PriceTable()
    model = Model()
    emu = Emulator()
    emu.reply_fn = model.reply
    home = Path(tempfile.mkdtemp(prefix="ember-savings-"))
    with BackgroundServer(emu) as up:
        direct = run_session(up.url, "direct-0001")
        port = free_port()
        env = {**os.environ, "EMBER_HOME": str(home), "EMBER_SHADOW_IDLE_SECONDS": "2"}
        seed(env)
        with process(proxy_cmd(port, up.url), env):
            url = f"http://127.0.0.1:{port}"
            asyncio.run(_healthy(url))
            model.retrieved = False
            through = run_session(url, "ember-0001")
            time.sleep(8)  # the shadow read after the session goes quiet
            if args.fixtures:
                fixtures_table(up.url, url, prices)
        stats = subprocess.run(
            [EMBER, "stats", "--cwd", CWD, "--json"], env=env, capture_output=True, text=True
        )
        report(prices, direct, through, ember_spend(home), emu, stats.stdout)
    print(f"compression CPU, 50 KB log: {shorten_cpu():.2f} ms p50")
    if args.keep:
        print(f"ember home kept: {home}")


FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "clients"


def recorded(client: str = "claude-code") -> list[tuple[str, list[tuple[str, str, bytes]]]]:
    """The recorded sessions of ``client``: (scenario, [(path, query, body)]) of each main
    turn, in the order the client sent them."""
    out = []
    for scenario in sorted((FIXTURES / client).iterdir()):
        turns = []
        for meta in sorted(scenario.glob("*-main.json")):
            head = json.loads(meta.read_text())
            turns.append((head["path"], head["query"], meta.with_suffix(".body").read_bytes()))
        if turns:
            out.append((scenario.name, turns))
    return out


def replay(url: str, turns: list[tuple[str, str, bytes]]) -> list[Usage]:
    """Each recorded request sent as the client sent it; the usage of each answer."""
    import urllib.request

    out = []
    for path, query, body in turns:
        target = url + path + (f"?{query}" if query else "")
        headers = {"content-type": "application/json", "x-api-key": "sk-bench"}
        headers["anthropic-version"] = "2023-06-01"
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=60) as r:
            out.append(_usage_of(r.read().decode()))
    return out


def _usage_of(text: str) -> Usage:
    from ember.protocols import ANTHROPIC
    from ember.protocols.assemble import assemble

    msg = assemble(ANTHROPIC, [text.encode()], text.lstrip().startswith("event:"))
    return msg.usage if msg is not None and msg.usage is not None else Usage()


def fixtures_table(up_url: str, ember_url: str, prices: PriceTable) -> None:
    """Recorded Claude Code sessions replayed direct and through ember, side by side."""
    print(
        f"\n{'recorded session':34s} {'turns':>5s} {'direct $':>9s} {'ember $':>9s} "
        f"{'ratio':>6s} {'read d':>7s} {'read e':>7s}"
    )
    for name, turns in recorded():
        d = replay(up_url, turns)
        e = replay(ember_url, turns)
        (dc, ds), (ec, es) = _priced(d, prices), _priced(e, prices)
        ratio = ec / dc if dc else float("nan")
        print(f"{name:34s} {len(turns):5d} {dc:9.4f} {ec:9.4f} {ratio:6.3f} {ds:7.3f} {es:7.3f}")


def _priced(usages: list[Usage], prices: PriceTable) -> tuple[float, float]:
    cost = sum(prices.cost(MODEL, u) or 0.0 for u in usages)
    read = sum(u.cache_read_tokens for u in usages)
    total = sum(u.total_input_tokens for u in usages)
    return cost, read / total if total else 0.0


def seed(env: dict[str, str]) -> None:
    facts = [
        "Refunds round half up to the cent (ROUND_HALF_UP), as the law requires.",
        "The billing tests live in tests/test_billing.py; run them with pytest -k refund.",
        "Release builds use cargo build --release; the UI bundle budget is 1 MB.",
    ]
    for fact in facts:
        subprocess.run(
            [EMBER, "memory", "add", "--cwd", CWD, fact], env=env, check=True, capture_output=True
        )


def report(
    prices: PriceTable,
    direct: list[Any],
    through: list[Any],
    spend: dict[str, float],
    emu: Emulator,
    stats_json: str,
) -> None:
    d_cost, d_share = cost(direct, prices)
    e_client, e_share = cost(through, prices)
    e_total = sum(spend.values())
    print(f"{'':28s} {'direct':>10s} {'ember':>10s}")
    print(f"{'requests':28s} {len(direct):10d} {len(through):10d}")
    print(f"{'client requests, $':28s} {d_cost:10.4f} {e_client:10.4f}")
    for origin, usd in sorted(spend.items()):
        print(f"{'  ember rows: ' + origin + ', $':28s} {'':10s} {usd:10.4f}")
    print(f"{'total, $':28s} {d_cost:10.4f} {e_total:10.4f}")
    print(f"{'cost ratio (ember / direct)':28s} {'':10s} {e_total / d_cost:10.3f}")
    print(f"{'cache-read share':28s} {d_share:10.3f} {e_share:10.3f}")
    for name, ok in survived(emu, "ember-0001").items():
        print(f"{'kept byte for byte: ' + name:28s} {'':10s} {'yes' if ok else 'NO':>10s}")
    measured = d_cost - e_total
    reported = None
    try:
        doc = json.loads(stats_json or "null")
        reported = (doc or {}).get("savings", {}).get("net_usd") if isinstance(doc, dict) else None
    except ValueError:
        pass
    print(f"{'net saved, measured $':28s} {'':10s} {measured:10.4f}")
    if reported is not None:
        gap = abs(reported - measured) / abs(measured) if measured else float("inf")
        print(f"{'net saved, reported $':28s} {'':10s} {reported:10.4f}  ({gap:.0%} off)")
    else:
        print(f"{'net saved, reported $':28s} {'':10s} {'n/a':>10s}")


if __name__ == "__main__":
    sys.exit(main())
