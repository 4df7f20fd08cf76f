"""``ember demo``: a complete offline session through the real proxy.

The provider emulator and the proxy are started in this process on free loopback ports; a
scripted coding agent talks to the proxy through the official ``anthropic`` SDK, exactly as
Claude Code would with ``ANTHROPIC_BASE_URL`` pointing at ember. No network, no API key.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
from rich.console import Console
from rich.table import Table

from ember.config import Settings, load_settings
from ember.project import resolve_project
from ember.protocols import ANTHROPIC
from ember.proxy.app import ProxyApp
from ember.proxy.stages import build_stages
from ember.server import BackgroundServer
from ember.shaping.stage import ShapingStage
from ember.shaping.verbosity import CLOSE_TAG, LEVEL_NAMES, OPEN_TAG
from ember.store.accounting import session_totals
from ember.testing import Emulator
from ember.testing.agent import ScriptedAgent, TurnUsage, demo_tasks, system_prompt


@dataclass
class ShapingTurn:
    turn: int
    kind: str
    effort_asked: str
    effort_sent: str


@dataclass
class ShapingSummary:
    """What output shaping did to the demo session, read from the bytes the provider got."""

    level: int
    source: str
    blocks_sent: int
    requests: int
    distinct_blocks: int
    client_system_untouched: bool
    block: str | None
    turns: list[ShapingTurn] = field(default_factory=list)


@dataclass
class DemoResult:
    turns: list[TurnUsage]
    totals: dict[str, object]
    db_path: Path
    shaping: ShapingSummary | None = None


def run_demo(home: Path | None = None, console: Console | None = None) -> DemoResult:
    console = console or Console()
    home = home or Path(tempfile.mkdtemp(prefix="ember-demo-"))
    emulator = Emulator()
    with BackgroundServer(emulator) as upstream:
        settings = load_settings(
            env={}, home=home, anthropic_url=upstream.url, openai_url=upstream.url + "/v1"
        )
        app = ProxyApp(settings, build_stages(settings))
        with BackgroundServer(app) as proxy:
            console.print(
                f"[bold]ember demo[/] — provider emulator on {upstream.url}, "
                f"proxy on {proxy.url}\n"
                f"A scripted agent talks to the proxy with the official anthropic SDK "
                f"(ANTHROPIC_BASE_URL={proxy.url}).\n"
            )
            with anthropic.Anthropic(
                base_url=proxy.url, api_key="demo-key-not-real", max_retries=0
            ) as client:
                # Claude Code pins the effort on every request; ember lowers it on tool-result
                # turns (output shaping).
                agent = ScriptedAgent(client, emulator, output_config={"effort": "high"})
                turns = agent.run(demo_tasks())
            _settle(app, proxy)
    result = _report(settings, agent, turns, console)
    result.shaping = _shaping_summary(app, emulator, agent, turns)
    if result.shaping is not None:
        _print_shaping(result.shaping, console)
    return result


def _settle(app: ProxyApp, proxy: BackgroundServer) -> None:
    import asyncio

    assert proxy.loop is not None
    asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(10)
    app.writer.flush()


def _report(
    settings: Settings, agent: ScriptedAgent, turns: list[TurnUsage], console: Console
) -> DemoResult:
    project = resolve_project({}, None, f"Working directory: {agent.cwd}")
    assert project is not None
    db = project.db_path(settings.home)
    [totals] = [t for t in session_totals(db) if t["session_id"] == agent.session_id]
    table = Table(title="Session 1 through the proxy (usage as the provider reported it)")
    for col in ("turn", "kind", "fresh input", "cache read", "cache write", "output"):
        table.add_column(col, justify="left" if col in ("turn", "kind") else "right")
    for t in turns:
        table.add_row(
            str(t.turn),
            t.kind,
            f"{t.input_tokens:,}",
            f"{t.cache_read_tokens:,}",
            f"{t.cache_write_tokens:,}",
            f"{t.output_tokens:,}",
        )
    console.print(table)
    total_in = sum(t.input_tokens + t.cache_read_tokens + t.cache_write_tokens for t in turns)
    read = sum(t.cache_read_tokens for t in turns)
    cost = totals["cost_usd"]
    console.print(
        f"\n[bold]Accounting[/] (stored per session in {db}):\n"
        f"  project         {project.identity}  (from the <env> block of the system prompt)\n"
        f"  session         {agent.session_id}  (from metadata.user_id, as Claude Code sends it)\n"
        f"  requests        {totals['requests']}\n"
        f"  cache reads     {read:,} of {total_in:,} input tokens "
        f"({read / max(total_in, 1):.0%}) billed at 0.1x\n"
        f"  cost            "
        + (f"${cost:.4f} at {agent.model} list prices" if isinstance(cost, float) else "unknown")
        + "\n\nSee it again with: "
        f"EMBER_HOME={settings.home} ember stats --cwd {agent.cwd}\n"
    )
    return DemoResult(turns, totals, db)


def _shaping_summary(
    app: ProxyApp, emulator: Emulator, agent: ScriptedAgent, turns: list[TurnUsage]
) -> ShapingSummary | None:
    stage = next((st for st in app.pipeline.stages if isinstance(st, ShapingStage)), None)
    state = stage.sessions.peek(agent.session_id) if stage is not None else None
    if state is None:
        return None
    sent = [r.json() for r in emulator.requests if r.path == "/v1/messages"]
    blocks = [ANTHROPIC.owned_system_block(b, OPEN_TAG, CLOSE_TAG) for b in sent]
    client_system = system_prompt(agent.cwd)
    asked = str((agent.output_config or {}).get("effort"))
    return ShapingSummary(
        level=state.level,
        source=state.source,
        blocks_sent=sum(b is not None for b in blocks),
        requests=len(sent),
        distinct_blocks=len(set(blocks)),
        client_system_untouched=all(
            b["system"][: len(client_system)] == client_system for b in sent
        ),
        block=blocks[0] if blocks else None,
        turns=[
            ShapingTurn(t.turn, t.kind, asked, str((b.get("output_config") or {}).get("effort")))
            for t, b in zip(turns, sent, strict=False)
        ],
    )


def _print_shaping(summary: ShapingSummary, console: Console) -> None:
    digest = hashlib.sha256((summary.block or "").encode()).hexdigest()[:12]
    same = "byte-identical on every turn" if summary.distinct_blocks == 1 else "CHANGED"
    untouched = "unchanged" if summary.client_system_untouched else "CHANGED"
    console.print(
        "[bold]Output shaping[/] (as the provider received each request):\n"
        f"  verbosity level {summary.level} ({LEVEL_NAMES[summary.level]}), "
        f"source: {summary.source}\n"
        f"  ember's block   after the last system block on {summary.blocks_sent} of "
        f"{summary.requests} requests, {same} (sha256 {digest}), so the cached prefix holds\n"
        f"  your system blocks and their cache_control: {untouched}"
    )
    if summary.block:
        console.print(summary.block, style="dim", markup=False, highlight=False)
    table = Table(title="Effort routing: lowered only on mechanical (tool-result) turns")
    for col in ("turn", "kind", "effort asked", "effort sent"):
        table.add_column(col)
    for t in summary.turns:
        lowered = t.effort_sent != t.effort_asked
        sent = f"[bold green]{t.effort_sent}[/] (lowered)" if lowered else t.effort_sent
        table.add_row(str(t.turn), t.kind, t.effort_asked, sent)
    console.print(table)
