"""The commands of ``ember memory`` that write: add, import and delete.

A bad input fails before the project's store is opened for writing, where it can be known
then: ``--metadata`` that is not a JSON object, ``delete`` in a project without ember data
(nothing is created). ``cli_target.writing`` then checks that the home and the file are
writable before the store is opened. An import's bad line is reported with its number and
none of it is stored; the other lines are. A fact stored while the embedder is unavailable is
found by its words at once, and the command says so (``warn_unembedded``). ``cli.py`` adds
these commands to the ``memory`` group.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from ember.cmdkit import access
from ember.cmdkit.options import config_option, json_option, project_options
from ember.memory.cli_target import not_found, resolve, warn_unembedded, writing
from ember.memory.cli_view import echo_json
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryInputError, SecretRefused
from ember.memory.importing import parse_lines, secrets_in
from ember.memory.models import TURN, NewMemory
from ember.redaction import redact

_BATCH = 256


@click.command("add")
@click.argument("text")
@click.option(
    "--importance",
    type=click.FloatRange(0, 1),
    default=0.5,
    show_default=True,
    help="0-1; 0.7 or more also makes a session fact user-wide.",
)
@click.option("--category", default=None, help="A short label (decision, preference...).")
@click.option("--metadata", default=None, help='A JSON object, e.g. \'{"source": "wiki"}\'.')
@click.option("--session-id", default=None, help="Scope the fact to one session.")
@click.option("--agent-id", default=None, help="Scope the fact to one agent.")
@click.option("--user-id", default=None, help="The user the fact belongs to.")
@project_options
@json_option
@config_option
def add_cmd(
    text: str,
    importance: float,
    category: str | None,
    metadata: str | None,
    session_id: str | None,
    agent_id: str | None,
    user_id: str | None,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Remember TEXT in the project (an identical current fact is not stored twice).

    A secret in TEXT (a key, a token, a password) is never stored: it is masked, or the fact
    is refused when the secret is all it says."""
    meta = _parse_metadata(metadata)
    found = redact(text)
    if found.only_secret:
        raise SecretRefused(
            f"not stored, {found.reason()}: say what the secret is for and where it is "
            "kept (a vault, an environment variable), never its value"
        )
    with writing(resolve(project_id, cwd, config_file)) as store:
        m = store.add(
            text,
            importance=importance,
            category=category,
            metadata=meta,
            session_id=session_id,
            agent_id=agent_id,
            user_id=user_id,
        )
        warn_unembedded(store)
    if as_json:
        echo_json({**m.to_json(), "redacted": list(found.kinds)})
    else:
        click.echo(f"[{m.id}] {m.content}")
        if found.found:
            click.echo(f"note: {found.reason()} before storing", err=True)


def _parse_metadata(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MemoryInputError(f"--metadata is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise MemoryInputError('--metadata must be a JSON object, e.g. \'{"source": "wiki"}\'')
    return value


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--turns",
    is_flag=True,
    help="Each line is one message of a conversation (its session_id names the conversation; "
    "order by created_at): a search that matches a message also ranks the reply to it, and "
    "a message repeated word for word is kept.",
)
@project_options
@json_option
@config_option
def import_cmd(
    file: Path,
    turns: bool,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Import FILE.jsonl: one JSON object per line.

    \b
    {"content": "...", "metadata": {...}, "created_at": "2026-03-01T12:00:00Z",
     "importance": 0.8, "user_id": "...", "session_id": "...", "agent_id": "..."}
    Only "content" is required. A bad line is reported with its number and nothing of it
    is written; the other lines are imported. Exit status 1 if any line was bad.
    """
    errors: list[tuple[int, str]] = []
    masked: list[tuple[int, str]] = []
    with writing(resolve(project_id, cwd, config_file)) as store:
        imported = _import_file(store, file, errors, masked, show_progress=not as_json, turns=turns)
        warn_unembedded(store)
        path = store.path
    if as_json:
        bad = [{"line": n, "error": e} for n, e in errors]
        red = [{"line": n, "redacted": r} for n, r in masked]
        echo_json({"imported": imported, "errors": bad, "redacted": red, "db": str(path)})
    else:
        for _, e in errors:
            click.echo(f"{file}: {e}", err=True)
        for n, r in masked:
            click.echo(f"{file}: line {n}: {r} before storing", err=True)
        click.echo(f"Imported {imported} memories from {file}; {len(errors)} bad lines.")
    if errors:
        sys.exit(1)


def _import_file(
    store: HierarchicalMemory,
    file: Path,
    errors: list[tuple[int, str]],
    masked: list[tuple[int, str]],
    *,
    show_progress: bool,
    turns: bool = False,
) -> int:
    """Import ``file`` in batches; ``turns``: every line is a conversation turn (``TURN``),
    none merged with an equal one (two people may both say "ok", and a reply chain needs
    each)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with file.open("rb") as fh:
        total = sum(1 for _ in fh)
    console = Console(stderr=True)
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    imported = 0
    batch: list[NewMemory] = []
    with (
        Progress(
            *columns, console=console, disable=not (show_progress and console.is_terminal)
        ) as bar,
        file.open("rb") as fh,
    ):
        task = bar.add_task(f"importing {file.name}", total=total)
        for lineno, item in parse_lines(fh):
            if isinstance(item, MemoryInputError):
                errors.append((lineno, str(item)))
                bar.advance(task)
                continue
            if (said := secrets_in(item)) is not None:
                masked.append((lineno, said))
            batch.append(dataclasses.replace(item, category=TURN) if turns else item)
            if len(batch) >= _BATCH:
                imported += len(store.add_many(batch, dedup=not turns))
                bar.advance(task, len(batch))
                batch = []
        if batch:
            imported += len(store.add_many(batch, dedup=not turns))
        bar.update(task, completed=total)
    return imported


@click.command("delete")
@click.argument("memory_id")
@project_options
@json_option
@config_option
def delete_cmd(
    memory_id: str,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Delete a memory for good (with its vector, evidence and user-wide copies)."""
    t = resolve(project_id, cwd, config_file)
    if not access.existing(t.settings.home, t.path):
        raise not_found(memory_id, t, False)
    with writing(t) as store:
        deleted = store.delete(memory_id)
    if not deleted:
        raise not_found(memory_id, t, True)
    if as_json:
        echo_json({"deleted": deleted})
    else:
        click.echo(f"Deleted {', '.join(deleted)}.")
