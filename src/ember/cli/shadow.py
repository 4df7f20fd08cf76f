"""``ember shadow``: what shadow memory ran, what it proposed, and how it compares with the
steward (the cold re-read it must beat before it takes over production memory).

Every number printed says how it was computed; cost is a list-price snapshot, never a bill, and
"unknown" (``null`` in JSON) as soon as one model involved has no price.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from ember.cli.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.errors import ProjectError
from ember.project import ProjectRef, project_from_cli
from ember.shadow import compare, pairing, reads, spend
from ember.shadow.budget import fmt, weighted_tokens
from ember.shadow.compare import Side
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT

T = TypeVar("T")

TOKENS_HOW = "tokens: the provider's usage counters, summed over the run's calls"
COST_HOW = (
    f"cost: each call's tokens at the price snapshot in force when it ran ({compare.PRICE_LABEL}); "
    "unknown when a model has no price"
)
LATENCY_HOW = "latency: first call sent to last answer read"


def _settings_and_path(
    project_id: str | None, cwd: Path | None, config_file: Path | None
) -> tuple[Settings, Path, ProjectRef]:
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None)
    if ref is None:
        raise ProjectError(
            "no project given: pass --project-id ID or --cwd PATH (shadow memory is kept "
            "per project)"
        )
    return settings, ref.db_path(settings.home), ref


@contextmanager
def _database(path: Path) -> Iterator[Database | None]:
    """The project's database, or None (said in one line) when it does not exist: a read
    command never creates one."""
    if not path.is_file():
        click.echo(f"No ember database for this project yet: {path} does not exist.", err=True)
        yield None
        return
    db = Database(path, PROJECT, log_failures=False)
    try:
        yield db
    finally:
        db.close()


def _read(path: Path, fn: Callable[[Connection], T]) -> T | None:
    with _database(path) as db:
        return None if db is None else db.read(fn)


def _side(steward: bool) -> Side:
    return "steward" if steward else "shadow"


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.4f}"


def _run_cost(r: dict[str, Any]) -> str:
    """Dollars; for a model without a price, weighted tokens, as the budget counts them."""
    if r["estimated_usd"] is not None or not r["calls"]:
        return _usd(r["estimated_usd"])
    protocol = "anthropic" if str(r["model"] or "").startswith("claude") else "openai"
    tokens = weighted_tokens(
        protocol,
        r["input_tokens"],
        r["cache_read_tokens"],
        r["cache_write_tokens"],
        r["output_tokens"],
    )
    return f"unknown\n[dim]{fmt(tokens, 'tokens')}[/dim]"


def _echo_lines(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        click.echo(json.dumps(row, ensure_ascii=False))


def _print(*renderables: Any) -> None:
    from rich.console import Console

    from ember.cli.shadow_report import with_notes

    console = Console()
    for r in with_notes(list(renderables)):
        console.print(r)


@click.group()
def shadow() -> None:
    """Shadow memory: facts extracted from the still-hot prompt cache after each turn.

    \b
    Examples:
      ember shadow runs --cwd ~/code/api
      ember shadow proposals --cwd ~/code/api --invalid
      ember shadow compare --cwd ~/code/api --json
    """


_STEWARD_FLAG = click.option(
    "--steward",
    is_flag=True,
    help="The steward's (the cold re-read it is compared with) instead of the shadow's.",
)


@shadow.command("runs")
@project_options
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@_STEWARD_FLAG
@json_option
@config_option
def runs_cmd(
    project_id: str | None,
    cwd: Path | None,
    limit: int,
    steward: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Runs, newest first: path, trigger, model, status (a skipped run says why: its
    messages stay unread for a later run), tokens, latency and cost, then the project's
    budget (--json: one object per line).

    Cost is in dollars at list prices; for a model without a price it is shown in weighted
    tokens (a cache read counts a tenth of a fresh token), as the budget counts it."""
    settings, path, _ = _settings_and_path(project_id, cwd, config_file)
    share, allowance = settings.shadow_max_share, float(settings.shadow_allowance_tokens)
    prices = settings.price_table()

    def read(c: Connection) -> tuple[list[dict[str, Any]], Any]:
        found = reads.runs(c, _side(steward), limit)
        return found, spend.project_budget(c, share, allowance, prices)

    got = _read(path, read)
    if got is None:
        raise SystemExit(1)
    rows, budget = got
    if as_json:
        _echo_lines(rows)
        return
    if not rows:
        click.echo(f"No {_side(steward)} runs recorded in {path}.")
        return
    _print(_runs_table(rows, _side(steward)))
    click.echo(spend.sentence(budget))


def _runs_table(rows: list[dict[str, Any]], side: Side) -> Any:
    from rich.table import Table

    table = Table(
        title=f"{side} runs, newest first",
        caption=f"{TOKENS_HOW} (input / cache read / cache write / output)\n{COST_HOW}\n"
        f"{LATENCY_HOW}\nfacts: valid / proposed",
    )
    table.add_column("run / session / started", no_wrap=True)
    table.add_column("path · trigger / model", overflow="fold")
    table.add_column("status", overflow="fold")
    for col in ("tokens", "latency ms", "cost", "facts"):
        table.add_column(col, justify="right")
    for r in rows:
        why = r["error"] or r["reason"]
        table.add_row(
            f"{r['id']}\n[dim]{r['session_id'][:24]}\n"
            f"{time.strftime('%m-%d %H:%M', time.localtime(r['started_at']))}[/dim]",
            f"{r['path']} · {r.get('trigger') or '-'}\n[dim]{r['model'] or '-'}[/dim]",
            r["status"] + (f"\n[dim]{why}[/dim]" if why else ""),
            f"{r['input_tokens']:,} / {r['cache_read_tokens']:,}\n"
            f"{r['cache_write_tokens']:,} / {r['output_tokens']:,}",
            "-" if r["latency_ms"] is None else f"{r['latency_ms']:,.0f}",
            _run_cost(r),
            f"{r['valid_proposals']} / {r['proposals']}",
        )
    return table


@shadow.command("proposals")
@project_options
@click.option("--run", "run_id", default=None, help="Only this run's proposals.")
@click.option("--invalid", is_flag=True, help="Only proposals that failed a check, with why.")
@_STEWARD_FLAG
@json_option
@config_option
def proposals_cmd(
    project_id: str | None,
    cwd: Path | None,
    run_id: str | None,
    invalid: bool,
    steward: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Proposed facts with their evidence, oldest first; an invalid one keeps its
    validation_error (--json: one object per line)."""
    _, path, _ = _settings_and_path(project_id, cwd, config_file)
    rows = _read(path, lambda c: reads.proposals(c, _side(steward), run_id, invalid))
    if rows is None:
        raise SystemExit(1)
    if as_json:
        _echo_lines(rows)
        return
    if not rows:
        click.echo("No proposals match." if run_id or invalid else f"No proposals in {path}.")
        return
    _print(_proposals_table(rows, _side(steward)))


def _evidence_text(evidence: Any) -> str:
    if not isinstance(evidence, list):
        return json.dumps(evidence, ensure_ascii=False)
    parts = []
    for e in evidence:
        if isinstance(e, dict):
            target = e.get("messageId") or e.get("sessionId") or "?"
            parts.append(f"{e.get('kind')} -> {target}")
        else:
            parts.append(json.dumps(e, ensure_ascii=False))
    return "\n".join(parts)


def _proposals_table(rows: list[dict[str, Any]], side: Side) -> Any:
    from rich.table import Table

    table = Table(
        title=f"{side} proposals",
        caption="valid: passed the schema and the evidence checks (each pointer names a "
        "message of this session of the kind it claims); it says nothing of whether the "
        "fact is true",
    )
    for col in ("id", "run", "content", "evidence", "check", "memory"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["id"],
            r["run_id"],
            r["content"],
            _evidence_text(r["evidence"]),
            "valid" if r["validation_error"] is None else f"invalid: {r['validation_error']}",
            r["memory_id"] or "-",
        )
    return table


@shadow.command("compare")
@project_options
@click.option(
    "--semantic",
    is_flag=True,
    help="Also pair facts with the light model (EMBER_LIGHT_MODEL, key EMBER_LIGHT_API_KEY): "
    "one call per session, accounted; reviewable pairs, not ground truth.",
)
@click.option(
    "--dry-run", is_flag=True, help="With --semantic: say what would be sent, call nothing."
)
@json_option
@config_option
def compare_cmd(
    project_id: str | None,
    cwd: Path | None,
    semantic: bool,
    dry_run: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """The shadow against the steward: exact, evidence and semantic coverage (kept apart),
    cost by path x model x status, latency p50/p95 and evidence-pointer quality."""
    settings, path, ref = _settings_and_path(project_id, cwd, config_file)
    with _database(path) as db:
        if db is None:
            raise SystemExit(1)
        inputs = db.read(reads.compare_inputs)
        section = _semantic(settings, db, ref, inputs, semantic, dry_run)
        result = compare.report(inputs, section)
    if as_json:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    from ember.cli.shadow_report import render

    _print(*render(result))


def _semantic(
    settings: Settings,
    db: Database,
    ref: ProjectRef,
    inputs: compare.Inputs,
    wanted: bool,
    dry_run: bool,
) -> dict[str, Any]:
    if not wanted:
        return pairing.not_computed("not asked for: pass --semantic (it calls the light model)")
    endpoint = pairing.light_endpoint(settings)
    steward, shadow_facts = compare.in_scope(inputs.facts, compare.compared_sessions(inputs.runs))
    if endpoint is None and not dry_run:
        return pairing.not_computed(
            "no key for the light model: set EMBER_LIGHT_API_KEY (light_api_key); ember "
            "never reuses a client's key from the command line"
        )
    model = endpoint.model if endpoint else settings.light_model or pairing.DEFAULT_LIGHT_MODEL

    async def go() -> dict[str, Any]:
        from ember.proxy.upstream import Upstream

        upstream = Upstream.from_settings(settings)
        try:
            ask: pairing.Ask
            if endpoint is None:
                ask = _never
            else:
                prices = settings.price_table()
                ask = pairing.model_ask(upstream, endpoint, prices, db, ref.identity)
            return await pairing.semantic_coverage(
                steward, shadow_facts, ask, model=model, dry_run=dry_run
            )
        finally:
            await upstream.close()

    return asyncio.run(go())


async def _never(session_id: str, system: str, user: str) -> tuple[str, float | None]:
    raise AssertionError("a dry run makes no call")
