"""``ember store``: the store as a whole — ``init`` (a PostgreSQL database made ready),
``copy`` (between ember homes and PostgreSQL, merging), ``prune`` (retention)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ember.cmdkit.options import config_option, json_option


@click.group()
def store() -> None:
    """The store as a whole: set up PostgreSQL, copy and merge stores, prune old rows."""


@store.command("init")
@click.argument("url", required=False, metavar="[URL]")
@config_option
def init(url: str | None, config_file: Path | None) -> None:
    """Make a PostgreSQL database ready for ember, or print the SQL that does.

    The second of two setup steps (the first: a role and its database). URL is the
    store's postgresql://user:password@host:5432/database (default: store_url,
    EMBER_STORE_URL). A password may be written as it is, '@', ':' and '/' included. The
    command checks, and makes what the URL's role may make: the server, pgvector in the
    database, the right to create a schema per project, ember's home schema.

    What the role may not do (create the extension, be granted a right, a database or a
    role that is missing) is printed as the exact SQL a database administrator runs, and
    the command exits 1. The output is a psql script: pipe it to `psql` as an
    administrator, then run `ember store init` again. The password is never printed.

    \b
    Examples:
      ember store init 'postgresql://ember:p@ss:w/rd@db.internal:5432/ember'
      ember store init | sudo -u postgres psql -d ember
    """
    from ember.config import load_settings
    from ember.store.pg.setup import init_store
    from ember.store.pg.url import check_store_url, require_driver

    chosen = url if url is not None else load_settings(config_file).store_url
    if not chosen:
        raise click.UsageError(
            "give the URL (ember store init postgresql://user:password@host:5432/db) or set "
            "store_url (EMBER_STORE_URL)"
        )
    try:
        checked = check_store_url(chosen)
    except ValueError as exc:
        raise click.UsageError(f"the URL {exc}") from None
    assert checked is not None
    require_driver()
    setup = init_store(checked)
    for line in setup.lines():
        click.echo(line)
    if not setup.ok:
        raise click.exceptions.Exit(1)


@store.command("copy")
@click.option("--from", "source", required=True, metavar="SRC", help="An ember home or a URL.")
@click.option("--to", "target", required=True, metavar="DST", help="An ember home or a URL.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Do the whole copy, count it, and write nothing: what would be copied and skipped.",
)
@json_option
def copy(source: str, target: str, dry_run: bool, as_json: bool) -> None:
    """Copy every project, the global store and stats from SRC to DST.

    SRC and DST are each an ember home (a folder such as ~/.ember) or a PostgreSQL store
    (postgresql://user:password@host:5432/db, as store_url takes it). The target gets the
    full current schema, then every table both sides have, parents first, counted: rows in
    the source, copied, already there, in the target after. Indexes (FTS5, sqlite-vec,
    pgvector's HNSW, the keyword tables) are rebuilt from the copied rows, never copied.
    Tables of features that do not run on PostgreSQL yet are listed as skipped, with why.

    Merges: DST may already be in use (a team's server, another developer's home). Rows the
    store numbers itself (requests, memories, transcript messages, evidence) are found by
    what identifies them (a memory's id, a request's session and time), never by number: a
    new one gets a free number in DST and everything pointing at it follows, so each
    developer's home can be copied into one store, one after the other.

    Idempotent: a row already in the target is kept, so copying the same home again copies
    nothing and says so; a target row that differs is reported as a conflict, never
    overwritten (where two homes legitimately differ — one entity per name, learned
    statistics — the target's row is kept and counted as such). The source is only read.
    Each database is copied in one transaction (holding its write lock: stop the proxies
    writing to DST first); after a failure, run it again to finish. Exit 0 when every
    table is verified, 1 otherwise.

    --dry-run does the same work in the same transactions and rolls them back: per table,
    how many rows would be copied, are already there, kept or in conflict. A database DST
    lacks is rehearsed in a throwaway place, never created.

    \b
    Examples:
      ember store copy --from ~/.ember --to postgresql://ember@db:5432/ember --dry-run
      ember store copy --from ~/.ember --to postgresql://ember@db:5432/ember
      ember store copy --from postgresql://ember@db:5432/ember --to ~/ember-backup --json
    """
    from ember.compose import spec
    from ember.store.copy import copy_store, parse

    src, dst = parse(source), parse(target)
    if as_json:
        report = copy_store(src, dst, features=spec().features, dry_run=dry_run)
        click.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        report = _with_progress(src, dst, dry_run)
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _with_progress(src: Any, dst: Any, dry_run: bool) -> Any:
    """The copy with a progress bar per table on a terminal (none when piped)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from ember.compose import spec
    from ember.store.copy import copy_store

    console = Console(stderr=True)
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    tasks: dict[tuple[str, str], Any] = {}
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:

        def progress(database: str, table: str, done: int, total: int) -> None:
            key = (database, table)
            if key not in tasks:
                tasks[key] = bar.add_task(f"{database} {table}", total=total)
            bar.update(tasks[key], completed=done)

        return copy_store(src, dst, progress, features=spec().features, dry_run=dry_run)


@store.command("prune")
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Delete what is older than this: 90d (days) or 12w (weeks); 32d at least.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted, delete nothing.")
@config_option
@json_option
def prune(older_than: str, dry_run: bool, config_file: Path | None, as_json: bool) -> None:
    """Delete rows older than AGE from the whole store; memories are kept.

    Every database of the store is pruned: EMBER_HOME's files, or store_url's PostgreSQL
    schemas. Goes: accounting rows older than AGE (and their hourly sums, so every total still adds
    up), the transcript and the memory injection ledger of sessions quiet for longer than
    AGE, shadow memory's and the steward's old runs (each session keeps its last one: where
    its reading stopped), compression's originals older than AGE.

    Kept: every memory with its evidence, vectors and entities, and every transcript
    message that evidence points at. Each database is pruned in one transaction.
    store_retention_days makes the proxy do this once a day.

    \b
    Examples:
      ember store prune --older-than 90d --dry-run
      ember store prune --older-than 26w --json
    """
    from ember.config import load_settings
    from ember.store.prune import parse_days
    from ember.store.pruning import prune_store

    try:
        days = parse_days(older_than)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    settings = load_settings(config_file)
    if settings.store_url is not None:
        from ember.store.pg.url import require_driver

        require_driver()
    report = prune_store(settings.home, settings.store_url, days, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)
