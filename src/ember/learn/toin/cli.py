"""``ember toin``: publish, export and import what TOIN observed (the stats file's patterns)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from ember.cmdkit import access
from ember.cmdkit import render as out
from ember.cmdkit.options import config_option, json_option
from ember.config import load_settings
from ember.learn.toin.patterns import Pattern
from ember.learn.toin.publish import DEFAULT_MIN_OBSERVATIONS, render
from ember.learn.toin.store import (
    ToinImportError,
    export_doc,
    import_doc,
    load_patterns,
    table_size,
)
from ember.store.database import Database
from ember.store.driver import Connection
from ember.store.registry import stats_db_path
from ember.store.schema import STATS

T = TypeVar("T")


@contextlib.contextmanager
def _writing(config_file: Path | None) -> Iterator[Database]:
    """The stats file's own short-lived owner (created, and migrated, on first use), once the
    home is known to be writable; with ``store_url``, the PostgreSQL store's ``ember_home``,
    where the proxy keeps the patterns (the file would hold none of them)."""
    settings = load_settings(config_file)
    home, path = settings.home, stats_db_path(settings.home)
    if settings.store_url is not None:
        with access.pg_database(settings, path, STATS) as pg:
            yield pg
        return
    access.writable(home, path)
    with access.database(path, STATS) as db:
        yield db


def _read(config_file: Path | None, fn: Callable[[Connection], T], empty: T) -> T:
    """``fn`` over the stats file (or the PostgreSQL store's ``ember_home``); ``empty`` when
    there is none yet (a read creates none)."""
    settings = load_settings(config_file)
    with access.kept(settings, stats_db_path(settings.home), STATS) as (db, _):
        return empty if db is None else db.read(fn)


def _write_file(path: Path, text: str) -> None:
    """Atomically: a reader (a starting proxy) sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@click.group()
def toin() -> None:
    """TOIN: what the tool outputs passing through the proxy look like.

    \b
    The proxy only observes (EMBER_TOIN, on by default): it never changes a request, and keeps
    structure hashes, hashed field names, counts and rates in $EMBER_HOME/stats.db (with
    store_url, the PostgreSQL store), never a value. What it learned leaves only through
    these commands:
      ember toin publish --output recommendations.toml
      ember toin export toin.json  /  ember toin import other.json
    """


@toin.command()
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The TOML file to write (replaced atomically).",
)
@click.option(
    "--min-observations",
    type=click.IntRange(min=1),
    default=DEFAULT_MIN_OBSERVATIONS,
    show_default=True,
    help="Leave out patterns observed fewer times than this (their rates are noise).",
)
@click.option(
    "--exclude-unknown",
    is_flag=True,
    help="Leave out patterns whose auth mode or model family could not be told.",
)
@json_option
@config_option
def publish(
    output: Path,
    min_observations: int,
    exclude_unknown: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Write the observed patterns as a sorted TOML file, for a proxy to read at start-up.

    Run it at a deploy boundary: the file is stable (same table, same bytes), has a provenance
    header, and holds one row per pattern with at least --min-observations observations.
    """
    patterns: list[Pattern] = _read(config_file, load_patterns, [])
    published = render(patterns, min_observations, include_unknown=not exclude_unknown)
    _write_file(output, published.text)
    summary = {
        "output": str(output),
        "patterns": published.rows,
        "below_floor": published.below_floor,
        "unknown_left_out": published.unknown_left_out,
        "min_observations": min_observations,
    }
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(
        f"{output}: {published.rows} patterns published "
        f"({published.below_floor} below {min_observations} observations left out"
        + (f", {published.unknown_left_out} of an unknown slice" if exclude_unknown else "")
        + ")."
    )
    if not patterns:
        click.echo("TOIN has observed nothing yet: run agents through `ember proxy` first.")


@toin.command("export")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@config_option
def export_cmd(output: Path, config_file: Path | None) -> None:
    """Write every pattern (hashes and statistics only) to OUTPUT as JSON, for another
    instance's `ember toin import`."""
    with _writing(config_file) as db:
        doc: dict[str, Any] = db.write(export_doc)
    _write_file(output, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    click.echo(f"{output}: {len(doc['patterns'])} patterns exported.")


@toin.command("import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@config_option
def import_cmd(source: Path, as_json: bool, config_file: Path | None) -> None:
    """Merge another instance's export into this one's patterns, weighted by sample size.

    The same export is imported once; a second import of it is refused.
    """
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.ClickException(f"{source} is not a JSON file: {exc}") from exc
    try:
        with _writing(config_file) as db:
            result = db.write(lambda conn: import_doc(conn, doc))
    except ToinImportError as exc:
        raise click.ClickException(f"{source}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(result.__dict__, indent=2))
    else:
        click.echo(
            f"{source}: {result.patterns} patterns merged ({result.new_patterns} new"
            + (f", {result.pruned} pruned to stay within the limits" if result.pruned else "")
            + ")."
        )


@toin.command("show")
@json_option
@config_option
def show(as_json: bool, config_file: Path | None) -> None:
    """How many patterns TOIN holds and the most observed ones."""
    nothing: tuple[list[Pattern], tuple[int, int]] = ([], (0, 0))
    patterns, (n, size) = _read(config_file, lambda c: (load_patterns(c), table_size(c)), nothing)
    top = sorted(patterns, key=lambda p: -p.observations)[:20]
    if as_json:
        rows = [
            {**p.to_json(), "confidence": p.confidence, "refetch_rate": p.refetch_rate} for p in top
        ]
        click.echo(json.dumps({"patterns": n, "bytes": size, "top": rows}, indent=2))
        return
    click.echo(f"{n} patterns, ~{size / 1024:.0f} KiB.")
    if top:
        out.console().print(_top_table(top))


def _top_table(top: list[Pattern]) -> Table:
    """The most observed patterns in 80 columns: the key on two lines (auth|model family,
    then the structure hash), a long value cut with "…" (--json has it whole)."""
    clip = out.Clip()
    t = out.table()
    t.add_column("auth|model family\nstructure", no_wrap=True)
    t.add_column("kind", no_wrap=True)
    t.add_column("observed", justify="right")
    t.add_column("refetch", justify="right")
    t.add_column("confidence", justify="right")
    for p in top:
        k = p.key
        t.add_row(
            Text(clip(f"{k.auth_mode}|{k.model_family}", 36))
            + Text("\n" + clip(k.structure_hash, 36), style="dim"),
            clip(p.kind, 16),
            f"{p.observations:,}",
            f"{p.refetch_rate:.1%}",
            f"{p.confidence:.2f}",
        )
    t.caption = " ".join(clip.hint())
    return t
