"""``ember learn``: learn from the agents' own session logs (CONTRACT.md, "Learning loop")."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ember.cli.options import json_option
from ember.learn.cli_backend import CLI_COMMANDS, DEFAULT_IDLE_TIMEOUT, DEFAULT_WALL_TIMEOUT
from ember.learn.model import LearnError

if TYPE_CHECKING:
    from ember.learn.analyze import Backend
    from ember.learn.logs import Scan
    from ember.learn.pipeline import LearnResult

# The pipeline (and the provider SDKs it needs) is imported when `ember learn` runs, not when
# `ember` starts: every other command, `ember proxy` first, would pay ~2 s and ~70 MB for it.

DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini"}
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


@click.command()
@click.option(
    "--agent",
    "agent",
    default="all",
    show_default=True,
    help="Whose logs: claude, codex, gemini, grok, opencode (or a plugin's name), or all.",
)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Read logs here instead of the agent's default location (repeatable; needs --agent).",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Only sessions run in this directory (or under it).",
)
@click.option("--llm-url", default=None, help="API base URL of the model (Anthropic Messages).")
@click.option("--model", default=None, help="Model name for --llm-url.")
@click.option(
    "--llm-protocol",
    type=click.Choice(["anthropic", "openai"]),
    default="anthropic",
    show_default=True,
    help="Protocol of --llm-url; openai wants a base URL ending in /v1.",
)
@click.option(
    "--cli",
    type=click.Choice(sorted(CLI_COMMANDS)),
    default=None,
    help="Ask an installed agent CLI instead of an API (uses your subscription).",
)
@click.option(
    "--cli-idle-timeout",
    type=float,
    default=DEFAULT_IDLE_TIMEOUT,
    show_default=True,
    help="Kill the CLI after this many seconds without output.",
)
@click.option(
    "--timeout",
    type=float,
    default=DEFAULT_WALL_TIMEOUT,
    show_default=True,
    help="Wall-clock cap on the model call, in seconds.",
)
@click.option("--scan-only", is_flag=True, help="Scan and report loops; ask no model.")
@json_option
def learn(
    agent: str,
    paths: tuple[Path, ...],
    project: Path | None,
    llm_url: str | None,
    model: str | None,
    llm_protocol: str,
    cli: str | None,
    cli_idle_timeout: float,
    timeout: float,
    scan_only: bool,
    as_json: bool,
) -> None:
    """Learn from your agents' session logs: loops, failing commands, wrong paths.

    Scans the logs (Claude Code ~/.claude/projects, Codex ~/.codex/sessions, Gemini CLI
    ~/.gemini/tmp, Grok ~/.grok/sessions, OpenCode ~/.local/share/opencode), finds loops (the
    same call repeated three times or more in a session, with the tokens it wasted), and asks
    a model once what the agent should know next time. Dry run: nothing is written.

    \b
    The model: --llm-url URL --model NAME (key from ANTHROPIC_API_KEY, or OPENAI_API_KEY with
    --llm-protocol openai), or --cli claude|codex|gemini. With neither, ANTHROPIC_API_KEY or
    OPENAI_API_KEY selects the provider's API, else the first agent CLI found on PATH.

    \b
    Examples:
      ember learn --agent claude --project .
      ember learn --scan-only --json
      ember learn --cli claude
    """
    from ember.learn.analyze import CliBackend
    from ember.learn.logs import Scan, readers, sources
    from ember.learn.pipeline import analyse

    available = readers()
    agents = sorted(available) if agent == "all" else [agent]
    project = project.resolve() if project is not None else None
    found = Scan(sources(available, agents, Path.home(), [p.expanduser() for p in paths]))
    if not found.sources:
        raise LearnError(
            f"no session logs found for {agent}; pass --path DIR (with --agent) if they are "
            "somewhere else"
        )
    backend = None if scan_only else _backend(llm_url, model, llm_protocol, cli, timeout)
    if isinstance(backend, CliBackend):
        backend = CliBackend(backend.cli, cli_idle_timeout, timeout)
    builder = _scan_with_progress(available, found, project, quiet=as_json)
    if found.sessions == 0:
        raise LearnError(_nothing_read(found, project))
    result = analyse(builder, found, backend)
    if as_json:
        click.echo(json.dumps(_as_json(result), indent=2))
    else:
        _print(result)
    if result.failed:
        raise click.exceptions.Exit(1)


def _backend(
    url: str | None, model: str | None, protocol: str, cli: str | None, timeout: float
) -> Backend:
    from ember.learn.analyze import ApiBackend, CliBackend

    if cli is not None and url is not None:
        raise LearnError("pass either --cli or --llm-url, not both")
    if cli is not None:
        return CliBackend(cli)
    if url is None:
        for name, variable in KEY_VARIABLES.items():
            if os.environ.get(variable):
                protocol = name
                default_url = "https://api.anthropic.com" if name == "anthropic" else None
                url = os.environ.get(f"{name.upper()}_BASE_URL") or default_url
                url = url or "https://api.openai.com/v1"
                break
        else:
            for name in sorted(CLI_COMMANDS):
                if shutil.which(CLI_COMMANDS[name][0]):
                    return CliBackend(name)
            raise LearnError(
                "no model to learn with: pass --llm-url URL --model NAME (with "
                "ANTHROPIC_API_KEY or OPENAI_API_KEY set), or --cli claude|codex|gemini; "
                "--scan-only reports loops without a model"
            )
    key = os.environ.get(KEY_VARIABLES[protocol])
    if not key:
        raise LearnError(f"--llm-url needs an API key: set {KEY_VARIABLES[protocol]}")
    return ApiBackend(url, model or DEFAULT_MODELS[protocol], key, protocol, timeout)


def _scan_with_progress(available: Any, found: Scan, project: Path | None, *, quiet: bool) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from ember.learn.pipeline import fold

    console = Console(stderr=True)
    columns = (
        TextColumn("scanning logs"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=quiet or not console.is_terminal) as bar:
        task = bar.add_task("scan", total=found.total_bytes or None)
        builder = fold(available, found, project=project, progress=lambda n: bar.advance(task, n))
    return builder


def _nothing_read(found: Scan, project: Path | None) -> str:
    if found.other_projects and project is not None:
        return (
            f"{found.other_projects} sessions found, none in {project}; "
            "drop --project to learn from all of them"
        )
    problems = "; ".join(str(p) for p in found.stats.problems[:3])
    return f"no session could be read from {len(found.sources)} log sources" + (
        f" ({problems})" if problems else ""
    )


def _as_json(result: LearnResult) -> dict[str, Any]:
    stats = result.scan.stats
    return {
        "scan": {
            "sources": len(result.scan.sources),
            "files": stats.files,
            "bytes": stats.bytes,
            "sessions": result.scan.sessions,
            "records": dict(sorted(stats.records.items())),
            "unknown_records": dict(sorted(stats.unknown.items())),
            "malformed_lines": stats.malformed,
            "problems": [str(p) for p in stats.problems],
        },
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
        "written": False,
    }


def _print(result: LearnResult) -> None:
    stats = result.scan.stats
    echo = click.echo
    echo(
        f"Scanned {result.scan.sessions} sessions in {stats.files} files "
        f"({stats.bytes / 1e6:.1f} MB), {sum(stats.records.values())} records."
    )
    if stats.unknown:
        kinds = ", ".join(f"{k} x{n}" for k, n in stats.unknown.most_common(5))
        echo(f"Skipped {sum(stats.unknown.values())} records of unknown types ({kinds}).")
    if stats.malformed:
        echo(f"{stats.malformed} lines could not be read:")
        for problem in stats.problems[:5]:
            echo(f"  {problem}")
    echo(f"\nLoops: {len(result.loops)}")
    for loop in result.loops[:10]:
        echo(
            f"  [{loop.kind}] {loop.signature}  x{loop.occurrences} in {loop.agent} session "
            f"{loop.session_id}, ~{loop.wasted_tokens} tokens wasted"
        )
    if result.backend is None:
        echo("\nNo model asked (--scan-only).")
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
    echo("\nDry run: nothing was written.")
