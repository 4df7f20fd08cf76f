"""``ember learn --verbosity``: learn's log scan joined to shaping's verbosity learning.

The two are features side by side, and neither imports the other: learn reads the agents'
logs (``ember.learn.logs``), shaping turns sessions into a level and a baseline
(``ember.shaping.from_logs``, which knows them only through its protocols) and keeps them in
its state. The CLI, which assembles the commands, joins them here and hands the join to the
``learn`` command (``CommandServices.learn_verbosity``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ember.learn.cli_report import print_scan, scan_json

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.learn.logs import Scan
    from ember.learn.logs.base import LogReader
    from ember.shaping.from_logs import VerbosityRun

#: Baseline strata shown in text (all are in --json and in the file).
STRATA_SHOWN = 8


def learn_verbosity(
    available: dict[str, LogReader],
    found: Scan,
    only: Path | None,
    settings: Settings,
    *,
    apply: bool,
    as_json: bool,
) -> None:
    """Scan ``found`` for verbosity signals, print the level and the baseline, and save them
    in shaping's state with ``apply``."""
    from ember.learn.cli import nothing_read, with_progress
    from ember.learn.logs import scan
    from ember.learn.model import LearnError
    from ember.shaping.cli import opened_state
    from ember.shaping.from_logs import save_verbosity, shaping_started, verbosity_of
    from ember.shaping.state import learned_level

    # Opened (and checked writable with --apply) before the scan, not after it.
    with opened_state(settings, write=apply) as state:
        since = shaping_started(state)
        run = with_progress(
            found,
            as_json,
            lambda progress: verbosity_of(scan(available, found, only, progress), since),
        )
        if found.sessions == 0:
            raise LearnError(nothing_read(found, only))
        try:
            current = learned_level(state.read("verbosity"))
        except ValueError:
            current = None
        written = save_verbosity(state, run.report) if apply else None
    if as_json:
        click.echo(json.dumps(verbosity_json(found, run, written, current), indent=2))
    else:
        print_verbosity(found, run, state.where("verbosity"), written, current)


def verbosity_json(
    found: Scan, run: VerbosityRun, written: str | None, current: int | None
) -> dict[str, Any]:
    report = run.report
    return {
        "scan": scan_json(found),
        "verbosity": {
            **report.to_json(),
            "current_level": current,
            "interrupts": report.signals.interrupts,
            "fast_skips": report.signals.fast_skips,
            "asked_for_more": report.signals.asked_for_more,
            "sessions_without_signals": dict(sorted(run.silent.items())),
            "messages_not_kept": run.dropped,
            "baseline": {
                key: {"answers": s.n, "mean_output_tokens": round(s.mean, 1)}
                for key, s in sorted(report.baseline.items())
            },
        },
        "written": [written] if written else [],
    }


def print_verbosity(
    found: Scan, run: VerbosityRun, target: str, written: str | None, current: int | None
) -> None:
    echo = click.echo
    report, s = run.report, run.report.signals
    print_scan(found)
    if run.silent:
        agents = ", ".join(f"{agent} x{n}" for agent, n in sorted(run.silent.items()))
        echo(
            f"{sum(run.silent.values())} sessions give no verbosity signals (their logs hold "
            f"no messages ember reads): {agents}."
        )
    echo(
        f"\nVerbosity signals from {report.sessions} sessions: {s.new_asks} new asks, "
        f"{s.interrupts} interrupted ({s.rate(s.interrupts):.0%}), {s.fast_skips} answered "
        f"faster than they could be read ({s.rate(s.fast_skips):.0%}), {s.asked_for_more} "
        f"asked for more ({s.rate(s.asked_for_more):.0%})."
    )
    if report.level is None:
        echo("Recommended level: none yet (too few new asks to tell; the level is left as is).")
    else:
        now = f" (now {current})" if current is not None else ""
        echo(f"Recommended level: {report.level}{now} (learning never recommends above 3).")
    since = " before shaping started" if report.shaped_since is not None else ""
    echo(
        f"\nBaseline{since}: {report.baseline_answers} answers in {len(report.baseline)} strata "
        "(output tokens by turn kind, input size, model family):"
    )
    ranked = sorted(report.baseline.items(), key=lambda kv: -kv[1].n)
    for key, stats in ranked[:STRATA_SHOWN]:
        echo(f"  {key}: {stats.n} answers, mean {stats.mean:.0f} output tokens")
    if len(ranked) > STRATA_SHOWN:
        echo(f"  ... {len(ranked) - STRATA_SHOWN} more (--json shows all)")
    if written is not None:
        echo(f"\nWritten: {written}")
    else:
        echo(f"\nDry run: nothing was written. Run again with --apply to save it in {target}.")
