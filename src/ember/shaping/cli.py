"""``ember output-savings``: what output shaping saved, estimated and measured, over time."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import click

from ember.cmdkit import access
from ember.cmdkit.options import config_option, json_option
from ember.config import Settings, load_settings
from ember.shaping.recorder import StoredState, read_state
from ember.shaping.report import HOLDOUT_HINT, report_json
from ember.shaping.savings import DayBucket, SavingsReport, build_report
from ember.shaping.settings import ShapingSettings
from ember.shaping.state import ShapingState
from ember.stats import SavingsEstimate
from ember.store.registry import stats_db_path
from ember.store.schema import STATS

BASELINE_HINT = (
    "No baseline yet: run the proxy with EMBER_OUTPUT_SHAPING=false for a while (its answers "
    "become the baseline), or use a holdout (below) to measure instead."
)
CHART_DAYS = 14
CHART_WIDTH = 36
_EIGHTHS = " ▏▎▍▌▋▊▉"


def _band(est: SavingsEstimate) -> str:
    iv = est.saved_tokens
    band = "95% band n/a (too few samples)"
    if iv.low is not None and iv.high is not None:
        band = f"95% band {iv.low:,.0f} .. {iv.high:,.0f}"
    share = ""
    if est.relative is not None:
        rel = est.relative
        share = f"; {rel.value:+.1%} of the unshaped output"
        if rel.low is not None and rel.high is not None:
            share += f" [{rel.low:+.1%} .. {rel.high:+.1%}]"
    return (
        f"{iv.value:+,.0f} output tokens over {est.requests:,} shaped requests "
        f"[{band}]{share}; {est.strata} {'stratum' if est.strata == 1 else 'strata'}"
        + (f" ({est.strata_left_out} left out: too few samples)" if est.strata_left_out else "")
    )


def bar(value: float, scale: float, width: int = CHART_WIDTH) -> str:
    """A horizontal bar of ``value / scale`` of ``width`` cells, in eighths of a cell;
    negative values are drawn with ``-`` so a loss is never mistaken for a saving."""
    if scale <= 0:
        return ""
    cells = min(abs(value) / scale, 1.0) * width
    if value < 0:
        return "-" * max(1, round(cells))
    full, part = int(cells), int((cells - int(cells)) * 8)
    return "█" * full + (_EIGHTHS[part] if part else "")


def chart_lines(days: list[tuple[str, DayBucket]], limit: int = CHART_DAYS) -> list[str]:
    """One line per day (the last ``limit`` with shaped traffic): the day's estimated savings,
    signed, as a bar; days without a baseline show the shaped request count only."""
    shown = [(d, b) for d, b in days if b.treatment_requests][-limit:]
    scale = max((abs(b.estimated_saved) for _, b in shown), default=0.0)
    lines = []
    for day, b in shown:
        if b.estimated_requests:
            lines.append(
                f"  {day}  {bar(b.estimated_saved, scale):<{CHART_WIDTH}} "
                f"{b.estimated_saved:+10,.0f}  ({b.estimated_requests:,} req)"
            )
        else:
            lines.append(
                f"  {day}  {'(no baseline)':<{CHART_WIDTH}} {'':>10}  "
                f"({b.treatment_requests:,} req)"
            )
    return lines


def report_text(report: SavingsReport, settings: Settings, state: ShapingState) -> list[str]:
    lines = [f"ember output-savings  ({state.where('ledger')})", ""]
    lines.append("estimated  (shaped output vs the unshaped baseline: a counterfactual)")
    lines.append("  " + (_band(report.estimated) if report.estimated.strata else BASELINE_HINT))
    lines.append("measured   (shaped vs holdout sessions sent unshaped, same strata)")
    holdout = settings.section(ShapingSettings).output_holdout
    if report.measured.strata:
        lines.append("  " + _band(report.measured))
    else:
        lines.append(f"  no holdout data yet (holdout is {holdout:g}).")
    if not report.measured.strata or holdout == 0:
        lines.append("  " + HOLDOUT_HINT)
    echo = ", ".join(f"{arm} {s.mean:.1%} (n={s.n:,})" for arm, s in sorted(report.echo.items()))
    lines.append(f"echo       answers repeating their context (8-word overlap): {echo or 'n/a'}")
    lines.append(
        f"requests   {report.treatment_requests:,} shaped, {report.control_requests:,} holdout"
    )
    chart = chart_lines(report.days)
    if chart:
        lines += ["", "estimated savings per day (output tokens, UTC):", *chart]
    return lines


@click.command("output-savings")
@json_option
@config_option
def output_savings(as_json: bool, config_file: Path | None) -> None:
    """What output shaping saved: "estimated" and "measured", with 95% bands.

    \b
    estimated  shaped output vs a baseline of unshaped output (run with
               EMBER_OUTPUT_SHAPING=false for a while);
               a counterfactual, so always labelled an estimate.
    measured   shaped sessions vs holdout sessions left unshaped
               (EMBER_OUTPUT_HOLDOUT=0.1 leaves 10% of sessions unshaped), compared
               only within strata (turn kind, input size, model family, tools) seen in both.

    Also the echo ratio (how much of each answer repeats its context) and a chart of
    estimated savings per day. Reads $EMBER_HOME/stats.db (with store_url, the PostgreSQL
    store); the proxy need not run.
    """
    settings = load_settings(config_file)
    with opened_state(settings, write=False) as state:
        try:
            stored: StoredState = read_state(state)
        except ValueError as exc:
            raise click.ClickException(
                f"{exc}. Move the file aside; the proxy starts a fresh one."
            ) from exc
    report = build_report(stored.ledger, stored.baseline)
    if as_json:
        click.echo(json.dumps(report_json(report, settings, state), indent=2))
        return
    click.echo("\n".join(report_text(report, settings, state)))


@contextlib.contextmanager
def opened_state(settings: Settings, *, write: bool) -> Iterator[ShapingState]:
    """Shaping's state in the home's stats.db, opened for one command. ``write`` False on a
    home without a stats.db creates nothing and reads what the files of before hold; a home
    that cannot be used is one line with the fix (``access``), not a traceback. With
    ``store_url``, the same rows in the PostgreSQL store's ``ember_home`` schema: the proxy
    writes them there, so a report of the file would show nothing it saved."""
    home = settings.home
    path = stats_db_path(home)
    if settings.store_url is not None:
        with access.pg_database(settings, path, STATS) as pg:
            found = write or pg.exists()
            yield ShapingState(home, (lambda: pg) if found else None, kept_in=pg.where)
        return
    if write:
        access.writable(home, path)
    access.folders(home, path)
    if not write and not access.existing(home, path):
        yield ShapingState(home, None)
        return
    with access.database(path, STATS) as db:
        yield ShapingState(home, lambda: db)
