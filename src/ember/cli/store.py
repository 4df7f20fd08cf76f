"""``ember store``: the store as a whole (``copy`` between an ember home and PostgreSQL)."""

from __future__ import annotations

import json
from typing import Any

import click

from ember.cli.options import json_option


@click.group()
def store() -> None:
    """The store as a whole: move it between SQLite files and PostgreSQL."""


@store.command("copy")
@click.option("--from", "source", required=True, metavar="SRC", help="An ember home or a URL.")
@click.option("--to", "target", required=True, metavar="DST", help="An ember home or a URL.")
@json_option
def copy(source: str, target: str, as_json: bool) -> None:
    """Copy every project, the global store and stats from SRC to DST.

    SRC and DST are each an ember home (a folder such as ~/.ember) or a PostgreSQL store
    (postgresql://user:password@host:5432/db, as store_url takes it). The target gets the
    full current schema, then every table both sides have, parents first, counted: rows in
    the source, copied, already there, in the target after. Indexes (FTS5, sqlite-vec,
    pgvector's HNSW, the keyword tables) are rebuilt from the copied rows, never copied.
    Tables of features that do not run on PostgreSQL yet are listed as skipped, with why.

    Idempotent: a row already in the target under its key is kept, so a second run copies
    nothing and says so; a target row that differs is reported as a conflict, never
    overwritten. The source is only read. Each database is copied in one transaction
    (holding its write lock: stop the proxies writing to DST first); after a failure, run
    it again to finish. Exit 0 when every table is verified, 1 otherwise.

    \b
    Examples:
      ember store copy --from ~/.ember --to postgresql://ember@db:5432/ember
      ember store copy --from postgresql://ember@db:5432/ember --to ~/ember-backup --json
    """
    from ember.store.copy import copy_store, parse

    src, dst = parse(source), parse(target)
    if as_json:
        report = copy_store(src, dst)
        click.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        report = _with_progress(src, dst)
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _with_progress(src: Any, dst: Any) -> Any:
    """The copy with a progress bar per table on a terminal (none when piped)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

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

        return copy_store(src, dst, progress)
