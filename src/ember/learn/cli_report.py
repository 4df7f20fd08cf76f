"""What ``ember learn`` prints (text and ``--json``): the scan, the loops, the model's
recommendations, and the write-back diff or what was written (``--verbosity``'s report, which
is shaping's, is printed where the CLI joins the two: ``ember.cli.learn_verbosity``).

Every run ends by saying whether anything was written, and where: a dry run must never look
like it changed a file, nor an ``--apply`` like it changed none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ember.learn.logs import Scan
    from ember.learn.pipeline import LearnResult
    from ember.learn.writeback import WritebackPlan


def scan_json(found: Scan) -> dict[str, Any]:
    stats = found.stats
    return {
        "sources": len(found.sources),
        "files": stats.files,
        "bytes": stats.bytes,
        "sessions": found.sessions,
        "sessions_by_agent": dict(sorted(found.agents.items())),
        "records": dict(sorted(stats.records.items())),
        "unknown_records": dict(sorted(stats.unknown.items())),
        "malformed_lines": stats.malformed,
        "problems": [str(p) for p in stats.problems],
    }


def plans_json(plans: Sequence[WritebackPlan]) -> list[dict[str, Any]]:
    return [
        {
            "target": str(p.target),
            "files": [str(c.path) for c in p.changes],
            "replaced_sections": list(p.replaced),
            "added_sections": list(p.added),
            "kept_sections": list(p.kept),
            "migrated_from": str(p.migrated_from) if p.migrated_from else None,
            "diff": p.diff(),
        }
        for p in plans
    ]


def learn_json(
    result: LearnResult,
    plans: Sequence[WritebackPlan],
    written: Sequence[Path],
    homeless: Sequence[str],
) -> dict[str, Any]:
    return {
        "scan": scan_json(result.scan),
        "loops": [loop.to_json() for loop in result.loops],
        "digest": {
            "tokens": result.digest.tokens,
            "sessions_included": result.digest.sessions_included,
            "sessions_left_out": result.digest.sessions_left_out,
        },
        "model": {
            "backend": result.backend,
            "ok": result.backend is not None and not result.failed,
            "error": result.error,
            "seconds": round(result.model_seconds, 3),
        },
        "recommendations": [r.to_json() for r in result.recommendations],
        "unusable_recommendations": result.unusable,
        "planned": plans_json(plans),
        "written": [str(p) for p in written],
        "agents_without_a_default_file": list(homeless),
    }


def print_scan(found: Scan) -> None:
    stats = found.stats
    echo = click.echo
    echo(
        f"Scanned {found.sessions} sessions in {stats.files} files "
        f"({stats.bytes / 1e6:.1f} MB), {sum(stats.records.values())} records."
    )
    if stats.unknown:
        kinds = ", ".join(f"{k} x{n}" for k, n in stats.unknown.most_common(5))
        echo(f"Skipped {sum(stats.unknown.values())} records of unknown types ({kinds}).")
    if stats.malformed:
        echo(f"{stats.malformed} lines could not be read:")
        for problem in stats.problems[:5]:
            echo(f"  {problem}")


def print_learn(result: LearnResult) -> None:
    """The scan, the loops and the model's recommendations (or why there are none)."""
    echo = click.echo
    print_scan(result.scan)
    echo(f"\nLoops: {len(result.loops)}")
    for loop in result.loops[:10]:
        echo(
            f"  [{loop.kind}] {loop.signature}  x{loop.occurrences} in {loop.agent} session "
            f"{loop.session_id}, ~{loop.wasted_tokens} tokens wasted"
        )
    if result.backend is None:
        echo("\nNo model asked (--scan-only). Nothing was written.")
        return
    if result.error is not None:
        echo(f"\nThe analysis failed ({result.backend}): {result.error}", err=True)
        echo("No recommendations were made; fix the above and run `ember learn` again.", err=True)
        return
    echo(f"\nRecommendations from {result.backend} ({result.model_seconds:.1f} s):")
    if not result.recommendations:
        echo("  The model read the logs and found nothing worth writing down.")
    section = None
    for rec in sorted(result.recommendations, key=lambda r: r.section):
        if rec.section != section:
            section = rec.section
            echo(f"\n## {section}")
        mark = " [loop guardrail]" if rec.is_loop_guardrail else ""
        echo(f"- {rec.text}  (~{rec.estimated_tokens_saved} tokens){mark}")
    if result.unusable:
        echo(f"\n{result.unusable} items of the model's answer were not usable and were left out.")


def print_writeback(
    plans: Sequence[WritebackPlan],
    written: Sequence[Path],
    applied: bool,
    homeless: Sequence[str],
    all_projects: bool,
) -> None:
    """The diff (dry run) or the files written (``--apply``), and the ways it could surprise."""
    echo = click.echo
    for agent in homeless:
        echo(f"\n{agent}: no default instructions file; name one with --target FILE.")
    if all_projects and plans:
        echo(
            "\nNote: sessions of every project were read; pass --project DIR to learn from "
            "one project's sessions only."
        )
    changed = [p for p in plans if p.changed]
    if not changed:
        echo(
            "\nNothing to write: "
            + ("the files already hold these lessons." if plans else "no lessons to write.")
        )
        return
    if applied:
        echo("\nWritten:")
        for path in written:
            echo(f"  {path}")
        return
    for plan in changed:
        what = ", ".join(
            f"{label} {', '.join(names)}"
            for label, names in (("new", plan.added), ("replaced", plan.replaced))
            if names
        )
        echo(f"\n--- would write {plan.target} ({what or 'no section change'}):")
        echo(plan.diff(), nl=False)
    echo("\nDry run: nothing was written. Run again with --apply to write it.")
