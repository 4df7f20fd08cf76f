"""``ember stats``: what each session cost, from the accounting rows."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text

from ember.budget import report as spend_limits
from ember.budget.settings import BudgetSettings
from ember.cli import stats_projects, stats_savings
from ember.cli.losses import problem_line
from ember.cmdkit import access, render
from ember.cmdkit.invocation import ember_command
from ember.cmdkit.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.memory.ledger import AskCounts, ask_counts
from ember.project import project_from_cli
from ember.savings_ledger import Ledger, build, window_start
from ember.shadow import spend
from ember.shadow.spend_share import Budget
from ember.store.accounting import (
    own_spend,
    own_spend_of,
    savings_rows,
    session_totals,
    sessions_of,
)
from ember.store.database import Database
from ember.store.registry import read_problems, stats_db_path
from ember.store.schema import PROJECT, STATS

if TYPE_CHECKING:
    from rich.table import Table


def _cost(v: Any, unpriced: int) -> Text:
    if v is None:
        return Text("unknown\n") + Text(f"{unpriced} unpriced", style="dim")
    return Text(f"${v:.4f}")


@click.command()
@project_options
@click.option("--limit", type=int, default=20, show_default=True, help="Sessions to show.")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=None,
    help="Only the last N UTC days (today included); default: everything recorded.",
)
@json_option
@config_option
def stats(
    project_id: str | None,
    cwd: Path | None,
    limit: int,
    days: int | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """What ember saved net, per-session requests, tokens and cost, what ember spent on its
    own, and the project's shadow-memory budget.

    The first line is the savings ledger: what compression and output shaping saved (at the
    price each request billed, shaping "est." or "measured" as `ember output-savings` says)
    minus what ember spent on its own (shadow memory, the steward, memory blocks injected and
    re-read, the verbosity block, retrievals); --json has it as "savings" with "net_usd" and
    each part beside it, per day and per session shown.

    Without --project-id/--cwd, shows the global stats file (requests whose project could not
    be resolved, and `ember learn`'s model calls); when it holds no sessions, lists the
    projects that do, each with the command that shows them. Cost is "unknown" when a model has no
    price — never a made-up $0. Calls ember makes on its own (shadow memory, the steward,
    memory tool rounds, learn) are listed apart, by origin, never in a session's totals.
    Shadow memory may spend, over the last 7 days, EMBER_SHADOW_MAX_SHARE of what the
    project's clients spent plus a small allowance (in weighted tokens when a model has no
    price); a line at the end says how much of that is spent. With a spend limit
    (budget_daily_usd, budget_monthly_usd), a line per limit says what was spent, what
    requests in flight on any proxy hold of it, and the limit; --json has it as "budget".
    """
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None, settings.project_identity)
    path = ref.db_path(settings.home) if ref else stats_db_path(settings.home)
    gather = _from_postgres if settings.store_url is not None else _from_file
    since = window_start(days) if days is not None else None
    report = gather(settings, path, ref.identity if ref else None, limit, since)
    if report.found:
        report.savings = build(
            report.savings_rows, settings.price_table(), stats_savings.output_rates(settings), since
        )
    problem = read_problems(settings.home).get(report.where)
    others = _projects(settings) if ref is None else []
    if as_json:
        out: dict[str, Any] = {"db": report.where, "sessions": report.rows}
        if ref is None:
            out["projects"] = [p.to_json() for p in others]
        out["ember_spend"] = report.own
        if report.budget is not None:
            out["shadow_budget"] = spend.describe(report.budget)
        if report.limits is not None:
            out["budget"] = report.limits
        if report.asks is not None:
            out["memory_asks"] = dataclasses.asdict(report.asks)
        if problem is not None:
            out["problem"] = problem
        if report.savings is not None:
            shown = [r["session_id"] for r in report.rows]
            out["savings"] = report.savings.to_json(days) | {
                "sessions": report.savings.sessions_json(shown)
            }
        click.echo(json.dumps(out, indent=2))
        return
    if report.savings is not None and (report.savings.client_requests or report.own):
        window = f"over the last {days} days" if days else "since the first request"
        render.say(*stats_savings.sentence(report.savings.to_json(days), window))
    missing = None if report.found else report.missing
    _print(report.where, missing, report.rows, report.own, report.budget, problem)
    for line in spend_limits.sentences(report.limits) if report.limits else ():
        render.say(line, out=render.console())
    if not report.rows:
        for line in stats_projects.listing(others):
            click.echo(line)
    if report.asks is not None:
        render.say(report.asks.sentence(), out=render.console())


@dataclasses.dataclass
class _Report:
    """What ``ember stats`` shows of one database, read from either backend."""

    where: str
    found: bool
    missing: str
    rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    own: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    budget: Budget | None = None
    #: where the project stands against its spend limits (``ember.budget.report``), if any
    limits: dict[str, Any] | None = None
    asks: AskCounts | None = None
    savings_rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    savings: Ledger | None = None


def _projects(settings: Settings) -> list[stats_projects.ProjectSessions]:
    """For a bare ``ember stats``: the project files holding sessions (file store only)."""
    if settings.store_url is not None:
        return []
    return stats_projects.project_sessions(settings.home, ember_command())


def _shown(rows: list[dict[str, Any]], since: float | None, limit: int) -> list[dict[str, Any]]:
    return [r for r in rows if since is None or r["last_seen"] >= since][:limit]


def _from_file(
    settings: Settings, path: Path, identity: str | None, limit: int, since: float | None
) -> _Report:
    project = identity is not None
    missing = (
        access.no_data(path)
        if project
        else f"No sessions recorded: {path} does not exist yet (nothing was created)."
    )
    report = _Report(str(path), access.existing(settings.home, path), missing)
    if report.found:
        # Opened here first: a file that cannot be used is one line with the fix, worded
        # for a command that runs once (``access.database``), before the reads below.
        with access.database(path, PROJECT if project else STATS) as db:
            report.budget = _budget(db, settings) if project else db.read(lambda c: None)
            report.asks = db.read(ask_counts) if project else None
            report.limits = _limits(db, settings, identity)
            report.savings_rows = db.read(lambda c: savings_rows(c, since))
        with access.one_shot(path):
            report.rows = _shown(session_totals(path), since, limit)
            report.own = own_spend(path, since)
    return report


def _from_postgres(
    settings: Settings, path: Path, identity: str | None, limit: int, since: float | None
) -> _Report:
    """The same report from the project's schema on PostgreSQL (``store_url``), memory's
    asks, the shadow budget and the spend limits included (those features run there)."""
    project = identity is not None
    with access.pg_database(settings, path, PROJECT if project else STATS) as db:
        report = _Report(db.where, db.exists(), "")
        report.missing = f"No sessions recorded: {report.where} does not exist yet."
        if report.found:
            report.rows = _shown(db.read(sessions_of), since, limit)
            report.own = db.read(lambda c: own_spend_of(c, since))
            report.savings_rows = db.read(lambda c: savings_rows(c, since))
            report.asks = db.read(ask_counts) if project else None
            report.budget = _budget(db, settings) if project else None
            report.limits = _limits(db, settings, identity)
    return report


def _print(
    path: Path | str,
    missing: str | None,
    rows: list[dict[str, Any]],
    own: list[dict[str, Any]],
    budget: Budget | None,
    problem: dict[str, Any] | None,
) -> None:
    if problem is not None:
        click.echo(problem_line(problem), err=True)
    out = render.console()
    if missing is not None:
        click.echo(missing)  # one line, as every read of a project with no data says it
    elif rows:
        out.print(_sessions_table(rows, path))
    else:
        render.say(f"No sessions recorded in {path}.", out=out)
    if own:
        out.print()
        out.print(_own_table(own))
    if budget is not None:
        out.print()
        render.say(spend.sentence(budget), out=out)


def _budget(db: Database, settings: Settings) -> Budget:
    """The project's shadow budget."""
    share, allowance = (
        settings.section("shadow").shadow_max_share,
        float(settings.section("shadow").shadow_allowance_tokens),
    )
    return db.read(lambda c: spend.project_budget(c, share, allowance, settings.price_table()))


def _limits(db: Database, settings: Settings, identity: str | None) -> dict[str, Any] | None:
    """The project's standing against its spend limits: spent, held by requests in flight
    on any proxy, each limit; None without a project or a limit."""
    if identity is None:
        return None
    return spend_limits.read(db, settings.section(BudgetSettings), identity)


_TOKENS = ("input", "cache\nread", "cache\nwrite", "output")
_TOKEN_KEYS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def _sessions_table(rows: list[dict[str, Any]], path: Path | str) -> Table:
    """Fits 80 columns: a session id cut to its start, tokens as 12.3k (exact in --json)."""
    clip = render.Clip()
    table = render.table(f"ember sessions ({path})")
    table.add_column("session", no_wrap=True)
    table.add_column("last seen", no_wrap=True)
    table.add_column("requests", justify="right")
    for col in (*_TOKENS, "cost"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            clip(r["session_id"], 16),
            time.strftime("%m-%d %H:%M", time.localtime(r["last_seen"])),
            str(r["requests"]),
            *(render.count(r[k]) for k in _TOKEN_KEYS),
            _cost(r["cost_usd"], r["unpriced_requests"]),
        )
    table.caption = " ".join(["tokens: k = thousand, M = million.", *clip.hint("ids cut")])
    return table


def _own_table(own: list[dict[str, Any]]) -> Table:
    table = render.table("ember's own calls (not in any session's totals)")
    table.add_column("origin")
    table.add_column("requests", justify="right")
    for col in (*_TOKENS, "cost"):
        table.add_column(col, justify="right")
    for r in own:
        table.add_row(
            r["origin"],
            str(r["requests"]),
            *(render.count(r[k]) for k in _TOKEN_KEYS),
            "unknown" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}",
        )
    return table
