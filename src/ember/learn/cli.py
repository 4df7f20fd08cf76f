"""``ember learn``: learn from the agents' own session logs (CONTRACT.md, "Learning loop")."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from ember.cmdkit import access
from ember.cmdkit.options import config_option, json_option
from ember.learn.cli_backend import CLI_COMMANDS, DEFAULT_IDLE_TIMEOUT, DEFAULT_WALL_TIMEOUT
from ember.learn.model import LearnError
from ember.store.registry import stats_db_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from ember.config import Settings
    from ember.learn.analyze import Backend
    from ember.learn.logs import Scan
    from ember.learn.logs.base import LogReader, Progress
    from ember.learn.pipeline import LearnResult

# The pipeline (and the provider SDKs it needs) is imported when `ember learn` runs, not when
# `ember` starts: every other command, `ember proxy` first, would pay ~2 s and ~70 MB for it.

DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini"}
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
T = TypeVar("T")


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
    help="Only sessions run in this directory (or under it), and write its files "
    "(default: every project's sessions; files in the current directory).",
)
@click.option("--apply", is_flag=True, help="Write what was learned (default: dry run).")
@click.option(
    "--target",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the learn block into this file instead of each agent's own file.",
)
@click.option(
    "--verbosity",
    is_flag=True,
    help="Learn the output verbosity level and baseline instead (no model call).",
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
@config_option
def learn(
    agent: str,
    paths: tuple[Path, ...],
    project: Path | None,
    apply: bool,
    target: Path | None,
    verbosity: bool,
    llm_url: str | None,
    model: str | None,
    llm_protocol: str,
    cli: str | None,
    cli_idle_timeout: float,
    timeout: float,
    scan_only: bool,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Learn from your agents' session logs: loops, failing commands, wrong paths.

    Scans the logs (Claude Code ~/.claude/projects, Codex ~/.codex/sessions, Gemini CLI
    ~/.gemini/tmp, Grok ~/.grok/sessions, OpenCode ~/.local/share/opencode), finds loops (the
    same call repeated three times or more in a session, with the tokens it wasted), and asks
    a model once what the agent should know next time.

    \b
    Where it writes (dry run by default: prints the diff, writes nothing; --apply writes,
    each file atomically). A marker block, <!-- ember:learn:start --> ... <!-- ember:learn:end -->,
    in the project root (--project, else the current directory); text outside it is never
    touched. Each agent whose sessions were read gets its own file, each file once:
      Claude Code   CLAUDE.local.md (added to .git/info/exclude; a block in CLAUDE.md moves)
      Codex, OpenCode, Grok   AGENTS.md
      Gemini CLI    GEMINI.md
    --target FILE writes only that file. What the block already holds is given to the model
    as previously learned, so a second run revises it rather than repeating it.

    \b
    The model: --llm-url URL --model NAME (key from ANTHROPIC_API_KEY, or OPENAI_API_KEY with
    --llm-protocol openai), or --cli claude|codex|gemini. With neither, ANTHROPIC_API_KEY or
    OPENAI_API_KEY selects the provider's API, else the first agent CLI found on PATH. An API
    call is recorded in $EMBER_HOME/stats.db with origin "learn", apart from your sessions.

    \b
    --verbosity: no model call. Interrupted answers and replies faster than an answer could
    be read (Claude Code and Codex logs) give the output verbosity level (never above 3) and
    the baseline `ember output-savings` measures against; --apply saves both in
    $EMBER_HOME/stats.db.

    \b
    Examples:
      ember learn --agent claude --project .
      ember learn --agent claude --project . --apply
      ember learn --verbosity --apply
      ember learn --scan-only --json
      ember learn --cli claude
    """
    from ember.config import load_settings
    from ember.learn.logs import Scan, readers, sources

    available = readers()
    agents = sorted(available) if agent == "all" else [agent]
    only = project.resolve() if project is not None else None
    root = only or Path.cwd().resolve()
    found = Scan(sources(available, agents, Path.home(), [p.expanduser() for p in paths]))
    if not found.sources:
        raise LearnError(
            f"no session logs found for {'any agent' if agent == 'all' else agent} in their "
            "default places (--help lists them); pass --agent NAME --path DIR if they are "
            "somewhere else"
        )
    settings = load_settings(config_file)
    if verbosity:
        _verbosity(available, found, only, settings, apply=apply, as_json=as_json)
        return
    if scan_only and (apply or target is not None):
        raise LearnError("--scan-only asks no model, so there is nothing to write; drop --apply")
    backend = None
    if not scan_only:
        backend = _backend(llm_url, model, llm_protocol, cli, (cli_idle_timeout, timeout))
    _learn(available, found, backend, settings, (only, root, target), apply=apply, as_json=as_json)


def _learn(
    available: dict[str, LogReader],
    found: Scan,
    backend: Backend | None,
    settings: Settings,
    where: tuple[Path | None, Path, Path | None],
    *,
    apply: bool,
    as_json: bool,
) -> None:
    """Scan, analyse, plan the write-back (and apply it); ``where`` is (the project sessions
    are kept to, the root files are written in, ``--target``)."""
    from ember.learn import cli_report as out
    from ember.learn.pipeline import analyse, fold
    from ember.learn.run import learned_text, plan_targets, write_targets
    from ember.learn.writeback import apply_writeback

    only, root, target = where
    builder = with_progress(
        found, as_json, lambda progress: fold(available, found, project=only, progress=progress)
    )
    if found.sessions == 0:
        raise LearnError(nothing_read(found, only))
    targets, homeless = write_targets(found.agents, root, target)
    learned = learned_text(targets, root) if backend is not None else None
    result = analyse(builder, found, backend, learned)
    _record_spend(result, backend, settings)
    plans = []
    if backend is not None and not result.failed and result.recommendations:
        plans = plan_targets(result.recommendations, targets, root)
    written = [path for plan in plans if apply for path in apply_writeback(plan)]
    if as_json:
        click.echo(json.dumps(out.learn_json(result, plans, written, homeless), indent=2))
    else:
        out.print_learn(result)
        if backend is not None and not result.failed:
            out.print_writeback(plans, written, apply, homeless, all_projects=only is None)
    if result.failed:
        raise click.exceptions.Exit(1)


def _record_spend(result: LearnResult, backend: Backend | None, settings: Settings) -> None:
    """The API call's row, origin ``learn``; a failure to record it never fails the run."""
    from ember.errors import StorageError
    from ember.learn.analyze import ApiBackend
    from ember.learn.spend import learn_record, record_learn_spend

    if not isinstance(backend, ApiBackend) or result.answer is None:
        return
    record = learn_record(
        result.answer,
        backend.protocol,
        settings.price_table(),
        result.started,
        result.model_seconds,
    )
    try:
        if settings.store_url is not None:
            record_learn_spend(settings.home, record, settings.store_url)
            return
        stats = stats_db_path(settings.home)
        access.writable(settings.home, stats)  # its own words, not the proxy's "retries"
        with access.one_shot(stats):
            record_learn_spend(settings.home, record)
    except (StorageError, OSError) as exc:
        click.echo(f"warning: the model call's cost was not recorded: {exc}", err=True)


def _verbosity(
    available: dict[str, LogReader],
    found: Scan,
    only: Path | None,
    settings: Settings,
    *,
    apply: bool,
    as_json: bool,
) -> None:
    """``--verbosity`` learns shaping's level and baseline from these logs: the CLI joins the
    two features (``CommandServices.learn_verbosity``), so neither imports the other."""
    from ember.exchange import CommandServices

    services = click.get_current_context().find_object(CommandServices)
    if services is None or services.learn_verbosity is None:
        raise click.ClickException(
            "run this command through `ember` (--verbosity saves shaping's level)"
        )
    services.learn_verbosity(available, found, only, settings, apply=apply, as_json=as_json)


def _backend(
    url: str | None,
    model: str | None,
    protocol: str,
    cli: str | None,
    timeouts: tuple[float, float],
) -> Backend:
    """The model to ask; ``timeouts`` is (a CLI's idle timeout, the wall-clock cap)."""
    from ember.learn.analyze import ApiBackend, CliBackend

    idle, timeout = timeouts
    if cli is not None and url is not None:
        raise LearnError("pass either --cli or --llm-url, not both")
    if cli is not None:
        return CliBackend(cli, idle, timeout)
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
                    return CliBackend(name, idle, timeout)
            raise LearnError(
                "no model to learn with: pass --llm-url URL --model NAME (with "
                "ANTHROPIC_API_KEY or OPENAI_API_KEY set), or --cli claude|codex|gemini; "
                "--scan-only reports loops without a model"
            )
    key = os.environ.get(KEY_VARIABLES[protocol])
    if not key:
        raise LearnError(f"--llm-url needs an API key: set {KEY_VARIABLES[protocol]}")
    return ApiBackend(url, model or DEFAULT_MODELS[protocol], key, protocol, timeout)


def with_progress(found: Scan, quiet: bool, work: Callable[[Progress], T]) -> T:
    """Run ``work`` (a scan) under a rich progress bar on stderr, by bytes read."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as Bar

    console = Console(stderr=True)
    columns = (
        TextColumn("scanning logs"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Bar(*columns, console=console, disable=quiet or not console.is_terminal) as bar:
        task = bar.add_task("scan", total=found.total_bytes or None)
        return work(lambda n: bar.advance(task, n))


def nothing_read(found: Scan, project: Path | None) -> str:
    if found.other_projects and project is not None:
        return (
            f"{found.other_projects} sessions found, none in {project}; "
            "drop --project to learn from all of them"
        )
    problems = "; ".join(str(p) for p in found.stats.problems[:3])
    return f"no session could be read from {len(found.sources)} log sources" + (
        f" ({problems})" if problems else ""
    )
