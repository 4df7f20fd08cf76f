"""``ember demo``: a complete offline session through the real proxy.

The provider emulator and the proxy are started in this process on free loopback ports; a
scripted coding agent talks to the proxy through the official ``anthropic`` SDK, exactly as
Claude Code would with ``ANTHROPIC_BASE_URL`` pointing at ember. No network, no API key.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anthropic
from rich.console import Console
from rich.table import Table

from ember.cmdkit.invocation import ember_command
from ember.compose import build_app
from ember.config import Settings, load_settings
from ember.demo.learn import LearnSummary, run_learn_demo
from ember.demo.memory import MemorySummary, run_memory_demo
from ember.demo.shadow import CWD as SHADOW_CWD
from ember.demo.shadow import ShadowSummary, run_shadow_demo
from ember.demo.shaping import ShapingSummary, print_shaping, shaping_summary
from ember.embedder import preload_from
from ember.project import resolve_project
from ember.proxy.app import ProxyApp
from ember.server import BackgroundServer
from ember.store.accounting import session_totals
from ember.testing import Emulator
from ember.testing.agent import ScriptedAgent, TurnUsage, demo_tasks


@dataclass
class DemoResult:
    turns: list[TurnUsage]
    totals: dict[str, object]
    db_path: Path
    shaping: ShapingSummary | None = None
    memory: MemorySummary | None = None
    shadow: ShadowSummary | None = None
    learn: LearnSummary | None = None
    #: the project session 1 ran in
    cwd: str = ""


def run_demo(
    home: Path | None = None, console: Console | None = None, *, keep: bool = False
) -> DemoResult:
    """The whole tour. Without ``home`` it runs in a new temporary folder, removed at the end
    unless ``keep`` (a demo run each day left a folder behind each day); a ``home`` given is
    the user's and always kept. Either way the last lines say where the data is, or was."""
    console = console or Console()
    owned = home is None
    home = home or Path(tempfile.mkdtemp(prefix="ember-demo-"))
    try:
        result = _tour(home, console)
    finally:
        if owned and not keep:
            shutil.rmtree(home, ignore_errors=True)
    _print_where(home, result, console, kept=keep or not owned)
    return result


def _tour(home: Path, console: Console) -> DemoResult:
    emulator = Emulator()
    with BackgroundServer(emulator) as upstream:
        settings = load_settings(
            env={}, home=home, anthropic_url=upstream.url, openai_url=upstream.url + "/v1"
        )
        # The memory part below waits for the embedder: start loading it now, beside session 1.
        preload_from(settings)
        app = build_app(settings)
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
    result.shaping = shaping_summary(app, emulator, agent, turns)
    if result.shaping is not None:
        print_shaping(result.shaping, console)
    result.memory = run_memory_demo(home, console)
    result.shadow = run_shadow_demo(home, console)
    result.learn = run_learn_demo(home, console)
    return result


def _settle(app: ProxyApp, proxy: BackgroundServer) -> None:
    import asyncio

    assert proxy.loop is not None
    asyncio.run_coroutine_threadsafe(app.drain(), proxy.loop).result(10)
    app.storage.flush(10)


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
        + "\n"
    )
    return DemoResult(turns, totals, db, cwd=agent.cwd)


def _print_where(home: Path, result: DemoResult, console: Console, *, kept: bool) -> None:
    """Where the demo's data is and the commands that show it again, spelled with the ember
    that ran (``.venv/bin/ember`` when ``ember`` is not on PATH); or that it was removed."""
    ember = ember_command()
    if not kept:
        console.print(
            f"\nThe demo's data ({home}) was removed. To keep it and look again: "
            f"{ember} demo --keep",
            markup=False,
            highlight=False,
            soft_wrap=True,  # a command cut over two lines cannot be pasted
        )
        return
    env = f"EMBER_HOME={shlex.quote(str(home))}"
    lines = [f"  {env} {ember} stats --cwd {shlex.quote(result.cwd)}"]
    if result.shadow is not None:
        lines.append(f"  {env} {ember} shadow runs --cwd {shlex.quote(SHADOW_CWD)}")
    console.print(
        f"\nThe demo's data is in {home}. See it again with:\n" + "\n".join(lines),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
