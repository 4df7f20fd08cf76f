"""``ember stats``: what each session cost, from the accounting rows."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from ember.cli.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.project import project_from_cli
from ember.shadow import spend
from ember.shadow.budget import Budget
from ember.store.accounting import own_spend, session_totals
from ember.store.database import Database
from ember.store.registry import read_problems, stats_db_path
from ember.store.schema import PROJECT


def _cost(v: Any, unpriced: int) -> str:
    if v is None:
        return f"unknown ({unpriced} unpriced)"
    return f"${v:.4f}"


@click.command()
@project_options
@click.option("--limit", type=int, default=20, show_default=True, help="Sessions to show.")
@json_option
@config_option
def stats(
    project_id: str | None, cwd: Path | None, limit: int, as_json: bool, config_file: Path | None
) -> None:
    """Per-session requests, tokens and cost, what ember spent on its own, and the project's
    shadow-memory budget.

    Without --project-id/--cwd, shows the global stats file (requests whose project could not
    be resolved, and `ember learn`'s model calls). Cost is "unknown" when a model has no
    price — never a made-up $0. Calls ember makes on its own (shadow memory, the steward,
    memory tool rounds, learn) are listed apart, by origin, never in a session's totals.
    Shadow memory may spend, over the last 7 days, EMBER_SHADOW_MAX_SHARE of what the
    project's clients spent plus a small allowance (in weighted tokens when a model has no
    price); the last line says how much of that is spent.
    """
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None)
    path = ref.db_path(settings.home) if ref else stats_db_path(settings.home)
    problem = read_problems(settings.home).get(str(path))
    rows = session_totals(path)[:limit]
    own = own_spend(path)
    budget = _budget(path, settings) if ref is not None else None
    if as_json:
        out: dict[str, Any] = {"db": str(path), "sessions": rows, "ember_spend": own}
        if budget is not None:
            out["shadow_budget"] = spend.describe(budget)
        if problem is not None:
            out["problem"] = problem
        click.echo(json.dumps(out, indent=2))
        return
    if problem is not None:
        click.echo(
            f"warning: a proxy switched this database off ({problem.get('state')}: "
            f"{problem.get('detail')}); rows after that were not recorded. "
            f"Run `ember doctor` for what to do.",
            err=True,
        )
    if rows:
        _print_sessions(rows, path)
    else:
        click.echo(f"No sessions recorded in {path}.")
    if own:
        _print_own(own)
    if budget is not None:
        click.echo(spend.sentence(budget))


def _budget(path: Path, settings: Settings) -> Budget | None:
    """The project's shadow budget (None: no database yet; a read never creates one)."""
    if not path.is_file():
        return None
    db = Database(path, PROJECT, log_failures=False)
    share, allowance = settings.shadow_max_share, float(settings.shadow_allowance_tokens)
    try:
        return db.read(
            lambda c: spend.project_budget(c, share, allowance, settings.price_table())
        )
    finally:
        db.close()


def _print_sessions(rows: list[dict[str, Any]], path: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ember sessions ({path})")
    for col in (
        "session",
        "last seen",
        "requests",
        "input",
        "cache read",
        "cache write",
        "output",
        "cost",
    ):
        table.add_column(col, justify="left" if col in ("session", "last seen") else "right")
    for r in rows:
        table.add_row(
            r["session_id"][:24],
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r["last_seen"])),
            str(r["requests"]),
            f"{r['input_tokens']:,}",
            f"{r['cache_read_tokens']:,}",
            f"{r['cache_write_tokens']:,}",
            f"{r['output_tokens']:,}",
            _cost(r["cost_usd"], r["unpriced_requests"]),
        )
    Console().print(table)


def _print_own(own: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="ember's own calls (not in any session's totals)")
    for col in ("origin", "requests", "input", "cache read", "cache write", "output", "cost"):
        table.add_column(col, justify="left" if col == "origin" else "right")
    for r in own:
        table.add_row(
            r["origin"],
            str(r["requests"]),
            f"{r['input_tokens']:,}",
            f"{r['cache_read_tokens']:,}",
            f"{r['cache_write_tokens']:,}",
            f"{r['output_tokens']:,}",
            "unknown" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}",
        )
    Console().print(table)
