"""``ember stats`` leads with what ember saved net, and the number is the one a user would
measure: the same agent session sent straight to the provider and through ember, both against
the emulator (its caching and its usage), the official SDK as the client.

The session is Claude-Code-shaped: a moving cache breakpoint, a long test log as a tool
output (shortened by ember, replayed on every later request), a memory block injected into
the first ask, one retrieval ember runs itself, then a few short asks that re-read it all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.prices import PriceTable
from ember.project import resolve_project
from ember.protocols.base import Usage
from ember.server import BackgroundServer
from ember.testing import Emulator, Reply
from ember.testing.agent import TOOLS, system_prompt
from ember.testing.tool_outputs import pytest_log
from tests.cli import realistic
from tests.cli.test_width import P, render
from tests.conftest import Stack, StackFactory
from tests.memory.conftest import pg_database
from tests.memory.test_stage_e2e import ACME, FACTS, seed

EMBER = str(Path(sys.executable).with_name("ember"))
MODEL = "claude-sonnet-4-5"
SESSION = {"x-ember-session-id": "savings-session-1"}
ASKS = ("Which module holds the refund code?", "Add a test for half-up rounding.",
        "Run it again.", "Summarise the fix in one line.", "Thanks, that is all.")  # fmt: skip


class Client:
    """An agent loop: the whole history every turn, the breakpoint on its last block."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.sdk = anthropic.Anthropic(
            base_url=base_url, api_key="sk-test", max_retries=0, default_headers=headers
        )
        self.history: list[dict[str, Any]] = []
        self.usage: list[Usage] = []

    def send(self, content: list[dict[str, Any]] | str) -> Any:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        self.history.append({"role": "user", "content": content})
        messages = [dict(m) for m in self.history]
        last = [dict(b) for b in messages[-1]["content"]]
        last[-1]["cache_control"] = {"type": "ephemeral"}
        messages[-1] = {**messages[-1], "content": last}
        msg = self.sdk.messages.create(
            model=MODEL, max_tokens=1024, system=system_prompt(ACME), tools=TOOLS,
            messages=messages,
        )  # fmt: skip
        content_out = [b.model_dump(exclude_none=True) for b in msg.content]
        self.history.append({"role": "assistant", "content": content_out})
        u = msg.usage
        self.usage.append(
            Usage(u.input_tokens, u.cache_read_input_tokens or 0,
                  u.cache_creation_input_tokens or 0, 0, u.output_tokens)
        )  # fmt: skip
        return msg


Session = Callable[[Emulator, Client, bool], None]


def run_session(emulator: Emulator, client: Client, retrieval: bool) -> None:
    """The same session for the user either way; through ember, the model once asks ember for
    lines it left out (a round the client never sees)."""
    log = pytest_log()
    emulator.script(Reply.tool_use("Bash", {"command": "pytest -v"}))
    first = client.send("Run the tests and tell me why the refund test fails.")
    [call] = [b for b in first.content if b.type == "tool_use"]
    emulator.script(Reply("test_refund_rounds_half_up fails: 10.24 instead of 10.25."))
    client.send([{"type": "tool_result", "tool_use_id": call.id, "content": log.text}])
    if retrieval:
        short = emulator.requests[-1].json()["messages"][2]["content"][0]["content"]
        ref = short.split("ember_retrieve ref=")[1].split()[0].rstrip("]")
        emulator.script(Reply.tool_use("ember_retrieve", {"ref": ref, "query": "billing"}))
    emulator.script(*(Reply(f"Done: step {i}.") for i in range(len(ASKS))))
    for ask in ASKS:
        client.send(ask)


def short_session(emulator: Emulator, client: Client, retrieval: bool) -> None:
    """Asks and answers only: nothing to shorten, so ember only adds (its blocks, its tool)."""
    emulator.script(*(Reply(f"Done: step {i}.") for i in range(len(ASKS) + 1)))
    client.send("The login endpoint returns 500 when the password is empty. Find out why.")
    for ask in ASKS:
        client.send(ask)


def stats_json(home: Path, *args: str, store_url: str | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(home)
    if store_url is not None:
        env["EMBER_STORE_URL"] = store_url
    r = subprocess.run(
        [EMBER, "stats", "--cwd", ACME, "--json", *args], env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def through_ember(make_stack: StackFactory, session: Session, **settings: Any) -> Stack:
    stack = make_stack(stages="features", **settings)
    if "store_url" in settings:
        ref = resolve_project({}, None, f"Working directory: {ACME}")
        assert ref is not None
        db = pg_database(settings["store_url"], stack.home, ref.db_path(stack.home))
        try:
            with HierarchicalMemory(db, get_embedder()) as mem:
                for fact in FACTS:
                    mem.add(fact, importance=0.8)
        finally:
            db.close()
    else:
        seed(stack.home, ACME, FACTS)
    client = Client(stack.url, SESSION)
    try:
        session(stack.emulator, client, True)
    finally:
        client.sdk.close()  # its pooled socket would be closed by the GC: a ResourceWarning
    stack.settle()
    return stack


def measured_net(session: Session, doc: dict[str, Any]) -> float:
    """The same session straight to the provider, less every exchange through ember (the
    client's and ember's own, as billed)."""
    with BackgroundServer(emulator := Emulator()) as upstream:
        client = Client(upstream.url, {})
        try:
            session(emulator, client, False)
        finally:
            client.sdk.close()
    prices = PriceTable()
    direct = sum(prices.cost(MODEL, u) or 0.0 for u in client.usage)
    return direct - sum(r["cost_usd"] for r in [*doc["sessions"], *doc["ember_spend"]])


@pytest.fixture
def compressed(make_stack: StackFactory) -> Stack:
    return through_ember(make_stack, run_session)


def test_stats_json_says_what_ember_saved_net_within_30_percent_of_the_measured_net(
    compressed: Stack,
) -> None:
    doc = stats_json(compressed.home)
    savings = doc["savings"]
    measured = measured_net(run_session, doc)
    assert measured > 0  # the log left out is worth more than ember's additions
    assert savings["net_usd"] == pytest.approx(measured, rel=0.30), (savings["net_usd"], measured)
    # each part beside the net, labelled
    assert savings["compression"]["usd"] > 0 and savings["compression"]["label"] == "estimated"
    assert savings["compression"]["requests"] == 1 + len(ASKS)  # new once, then replayed
    assert savings["memory_blocks"]["blocks_written"] == 1
    assert savings["memory_blocks"]["rereads"] >= len(ASKS)
    assert savings["retrievals"]["requests"] == 1 and savings["retrievals"]["label"] == "billed"
    # the hidden round as billed, and the lines it brought back, read by the answer after it
    round_cost = next(r["cost_usd"] for r in doc["ember_spend"] if r["origin"] == "owned_tools")
    assert savings["retrievals"]["usd"] > round_cost
    parts = ("compression", "shaping", "shadow", "steward", "retrievals", "memory_blocks",
             "verbosity_block", "tool_definitions", "learn", "other")  # fmt: skip
    saved = savings["compression"]["usd"] + savings["shaping"]["usd"]
    spent = sum(savings[p]["usd"] for p in parts[2:])
    assert savings["net_usd"] == pytest.approx(saved - spent, abs=1e-5)  # each part rounded
    # no baseline and no holdout: shaping says so rather than show $0 as a saving
    assert savings["shaping"]["requests_without_estimate"] == savings["shaping"]["requests"] > 0
    assert "EMBER_OUTPUT_SHAPING=false" in savings["why"]["shaping"]
    [session] = savings["sessions"]
    assert session["net_usd"] == pytest.approx(savings["net_usd"], abs=1e-6)
    assert sum(d["net_usd"] for d in savings["days"]) == pytest.approx(savings["net_usd"])


def test_with_nothing_to_shorten_the_net_is_what_ember_added_within_30_percent(
    make_stack: StackFactory,
) -> None:
    stack = through_ember(make_stack, short_session)
    doc = stats_json(stack.home)
    measured = measured_net(short_session, doc)
    assert measured < 0  # its blocks and tool cost, and nothing was left out
    assert doc["savings"]["net_usd"] == pytest.approx(measured, rel=0.30)


def test_on_postgresql_stats_nets_the_same_savings_as_on_sqlite(
    make_stack: StackFactory, compressed: Stack, pg_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "on-postgres"
    on_pg = through_ember(make_stack, run_session, store_url=pg_url, home=home)
    assert not list(on_pg.home.rglob("ember.db"))
    sqlite, pg = (
        stats_json(compressed.home)["savings"],
        stats_json(on_pg.home, store_url=pg_url)["savings"],
    )
    assert pg["net_usd"] > 0
    for key in ("net_usd", "saved_usd", "spent_usd"):
        assert pg[key] == pytest.approx(sqlite[key], abs=1e-6), key
    assert pg["memory_blocks"]["rereads"] == sqlite["memory_blocks"]["rereads"]


def test_stats_leads_with_the_net_sentence_and_keeps_its_other_keys(compressed: Stack) -> None:
    stack = compressed
    doc = stats_json(stack.home, "--days", "7")
    assert {"db", "sessions", "ember_spend", "memory_asks", "savings"} <= set(doc)
    assert doc["savings"]["window_days"] == 7
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    out = subprocess.run(
        [EMBER, "stats", "--cwd", ACME, "--days", "7"],
        env={**env, "EMBER_HOME": str(stack.home), "COLUMNS": "200"},
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    first = out.splitlines()[0]
    net = doc["savings"]["net_usd"]
    assert first.startswith(f"Saved ${net:.4f} net over the last 7 days (compression $")
    assert "shaping no estimate" in first and "− spent $" in first
    assert "memory blocks $" in first and "retrievals $" in first and "shadow $" in first


def test_an_unpriced_call_makes_the_net_unknown_and_says_how_to_price_it(tmp_path: Path) -> None:
    """The realistic home's steward ran on a model without a price: its part is unknown, and
    so is the net — never a net that left it out."""
    home = tmp_path / "home"
    realistic.build(home)
    out = render(home, "stats", *P, columns=200)
    first, second = out.splitlines()[:2]
    assert first.startswith("Saved: unknown net since the first request (compression $0.0000")
    assert "steward unknown" in first and "shadow $0.0123" in first
    assert second.strip().startswith("1 request is of a model without a price")
    doc = json.loads(render(home, "stats", *P, "--json"))["savings"]
    assert doc["net_usd"] is None and doc["steward"]["usd"] is None
    assert doc["shadow"]["usd"] == pytest.approx(0.0123)
