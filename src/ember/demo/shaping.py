"""The output-shaping part of the demo, read from the bytes the provider received."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from ember.protocols import ANTHROPIC
from ember.protocols.edits import owned_system_block
from ember.proxy.app import ProxyApp
from ember.shaping.stage import ShapingStage
from ember.shaping.verbosity import CLOSE_TAG, LEVEL_NAMES, OPEN_TAG
from ember.testing import Emulator
from ember.testing.agent import ScriptedAgent, TurnUsage, system_prompt
from ember.testing.shadow import question_of


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


def shaping_summary(
    app: ProxyApp, emulator: Emulator, agent: ScriptedAgent, turns: list[TurnUsage]
) -> ShapingSummary | None:
    stage = next((st for st in app.pipeline.stages if isinstance(st, ShapingStage)), None)
    state = stage.sessions.peek(agent.session_id) if stage is not None else None
    if state is None:
        return None
    # The client's own requests (not the shadow's read of the session when the proxy stopped).
    sent = [r.json() for r in emulator.requests if r.path == "/v1/messages"]
    sent = [b for b in sent if question_of(b) is None]
    blocks = [owned_system_block(ANTHROPIC, b, OPEN_TAG, CLOSE_TAG) for b in sent]
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


def print_shaping(summary: ShapingSummary, console: Console) -> None:
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
