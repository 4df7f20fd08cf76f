"""``ember shadow``: what shadow memory ran, what it proposed, and how it compares with the
steward (the cold re-read it must beat before it takes over production memory).

Every number printed says how it was computed; cost is a list-price snapshot, never a bill, and
"unknown" (``null`` in JSON) as soon as one model involved has no price.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ember.cmdkit import access, render
from ember.cmdkit.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.errors import ProjectError
from ember.exchange import CommandServices
from ember.project import ProjectRef, project_from_cli
from ember.shadow import compare, pairing, reads, spend
from ember.shadow.cli_tables import proposals_table, runs_table
from ember.shadow.compare import Side
from ember.shadow.settings import ShadowSettings
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.schema import PROJECT

T = TypeVar("T")

COST_HOW = (
    f"cost: each call's tokens at the price snapshot in force when it ran ({compare.PRICE_LABEL}); "
    "unknown when a model has no price"
)


def _settings_and_path(
    project_id: str | None, cwd: Path | None, config_file: Path | None
) -> tuple[Settings, Path, ProjectRef]:
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None, settings.project_identity)
    if ref is None:
        raise ProjectError(
            "no project given: pass --project-id ID or --cwd PATH (shadow memory is kept "
            "per project)"
        )
    return settings, ref.db_path(settings.home), ref


def _read(settings: Settings, path: Path, fn: Callable[[Connection], T]) -> tuple[T | None, str]:
    """``fn`` over the project's data, and where that is; None when there is none yet."""
    with access.kept(settings, path, PROJECT) as (db, where):
        return (None if db is None else db.read(fn)), where


def _no_data(where: str, as_json: bool, empty: Any) -> None:
    """No data yet: an empty document for --json (the note on stderr), else the note."""
    if as_json:
        render.echo_json(empty)
    note = f"This project has no ember data yet: {where} does not exist (nothing was created)."
    click.echo(note, err=as_json)


def _side(steward: bool) -> Side:
    return "steward" if steward else "shadow"


def _print(*renderables: Any) -> None:
    from ember.shadow.cli_report import with_notes

    console = render.console()
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
    budget (--json: one array, [] when none).

    Cost is in dollars at list prices; for a model without a price it is shown in weighted
    tokens (a cache read counts a tenth of a fresh token), as the budget counts it."""
    settings, path, _ = _settings_and_path(project_id, cwd, config_file)
    share, allowance = (
        settings.section(ShadowSettings).shadow_max_share,
        float(settings.section(ShadowSettings).shadow_allowance_tokens),
    )
    prices = settings.price_table()

    def read(c: Connection) -> tuple[list[dict[str, Any]], Any]:
        found = reads.runs(c, _side(steward), limit)
        return found, spend.project_budget(c, share, allowance, prices)

    got, where = _read(settings, path, read)
    if got is None:
        _no_data(where, as_json, [])
        return
    rows, budget = got
    if as_json:
        render.echo_json(rows)
        return
    if not rows:
        render.say(f"No {_side(steward)} runs recorded in {where}.")
        return
    _print(runs_table(rows, f"{_side(steward)} runs, newest first", COST_HOW))
    render.say(spend.sentence(budget))


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
    validation_error (--json: one array, [] when none)."""
    settings, path, _ = _settings_and_path(project_id, cwd, config_file)
    rows, where = _read(
        settings, path, lambda c: reads.proposals(c, _side(steward), run_id, invalid)
    )
    if rows is None:
        _no_data(where, as_json, [])
        return
    if as_json:
        render.echo_json(rows)
        return
    if not rows:
        render.say("No proposals match." if run_id or invalid else f"No proposals in {where}.")
        return
    _print(proposals_table(rows, f"{_side(steward)} proposals"))


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
    with access.kept(settings, path, PROJECT) as (db, where):
        if db is None:
            nothing = pairing.not_computed("the project has no ember data yet")
            _no_data(where, as_json, compare.report(compare.Inputs(), nothing))
            return
        inputs = db.read(reads.compare_inputs)
        section = _semantic(settings, db, ref, inputs, semantic, dry_run)
        result = compare.report(inputs, section)
    if as_json:
        render.echo_json(result)
        return
    from ember.shadow.cli_report import report

    _print(*report(result))


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
    model = (
        endpoint.model
        if endpoint
        else settings.section(ShadowSettings).light_model or pairing.DEFAULT_LIGHT_MODEL
    )

    services = click.get_current_context().find_object(CommandServices)
    if services is None:
        raise click.ClickException("run this command through `ember` (it opens a provider client)")

    async def go() -> dict[str, Any]:
        upstream = services.upstream(settings)
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
