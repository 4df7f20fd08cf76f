"""``ember memory``: add, import, search, list, show, delete and export a project's memories.

Every command names its project with ``--project-id ID`` or ``--cwd PATH`` (the resolution the
proxy applies to ``x-ember-project-id`` / ``x-ember-cwd``). Without either, the command
refuses — memory is per project and a guess would write into the wrong one — unless
``EMBER_UNRESOLVED_PROJECT=global`` opted into the shared store.

Tests swap the embedder through the click context object (``obj={"embedder": factory}``);
otherwise the configured model is loaded on first need (``list``/``show``/``delete``/
``export`` never load it).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ember.cli.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.errors import ProjectError
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryInputError, MemoryNotFound
from ember.memory.importing import parse_lines
from ember.memory.models import TURN, Memory, MemoryHit, NewMemory, iso
from ember.memory.router import MemoryRouter
from ember.memory.writers import WRITERS, export, writer_for
from ember.memory.writers.base import default_dest
from ember.models.base import Embedder
from ember.project import ProjectRef, project_from_cli

EmbedderFactory = Callable[[], Embedder]
_BATCH = 256
_SHOWN: tuple[str, ...] = ("id", "content", "scope", "importance", "category", "created_at")
_SHOWN += (
    "valid_until",
    "supersedes",
    "superseded_by",
    "promoted_from",
    "access_count",
    "metadata",
)


def _embedder_factory(settings: Settings) -> EmbedderFactory:
    override = (click.get_current_context().find_object(dict) or {}).get("embedder")
    if override is not None:
        return override  # type: ignore[no-any-return]

    def load() -> Embedder:
        from ember.models import embedder_from

        return embedder_from(settings)

    return load


@contextmanager
def _store(
    project_id: str | None,
    cwd: Path | None,
    config_file: Path | None,
    time_aware: bool | None = None,
) -> Iterator[tuple[HierarchicalMemory, ProjectRef | None]]:
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None)
    path = MemoryRouter(settings, None).path_for(ref)
    if path is None:
        raise ProjectError(
            "no project given: pass --project-id ID or --cwd PATH (memories are kept per "
            "project; EMBER_UNRESOLVED_PROJECT=global opts into one shared store)"
        )
    store = HierarchicalMemory(
        path,
        _embedder_factory(settings),
        vector_index=settings.memory_vector_index,
        time_aware=settings.memory_time_aware if time_aware is None else time_aware,
    )
    try:
        yield store, ref
    finally:
        store.close()


def _warn_unembedded(store: HierarchicalMemory) -> None:
    if store.embedder_error is not None:
        click.echo(
            f"note: the embedder is unavailable ({store.embedder_error}); memories are stored "
            "and found by keywords, and get vectors once it loads",
            err=True,
        )


def _echo_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


@click.group()
def memory() -> None:
    """Cross-session memory of one project: facts the agent gets recalled in later sessions.

    \b
    Examples:
      ember memory add --cwd ~/code/api "The API uses PostgreSQL 16"
      ember memory search --cwd ~/code/api "which database?" --json
      ember memory export --cwd ~/code/api --format claude
    """


@memory.command("add")
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
    """Remember TEXT in the project (an identical current fact is not stored twice)."""
    meta = _parse_metadata(metadata)
    with _store(project_id, cwd, config_file) as (store, _):
        m = store.add(
            text,
            importance=importance,
            category=category,
            metadata=meta,
            session_id=session_id,
            agent_id=agent_id,
            user_id=user_id,
        )
        _warn_unembedded(store)
    if as_json:
        _echo_json(m.to_json())
    else:
        click.echo(f"[{m.id}] {m.content}")


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


@memory.command("import")
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
    with _store(project_id, cwd, config_file) as (store, _):
        imported = _import_file(store, file, errors, show_progress=not as_json, turns=turns)
        _warn_unembedded(store)
        path = store.path
    if as_json:
        bad = [{"line": n, "error": e} for n, e in errors]
        _echo_json({"imported": imported, "errors": bad, "db": str(path)})
    else:
        for _, e in errors:
            click.echo(f"{file}: {e}", err=True)
        click.echo(f"Imported {imported} memories from {file}; {len(errors)} bad lines.")
    if errors:
        sys.exit(1)


def _import_file(
    store: HierarchicalMemory,
    file: Path,
    errors: list[tuple[int, str]],
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
            batch.append(dataclasses.replace(item, category=TURN) if turns else item)
            if len(batch) >= _BATCH:
                imported += len(store.add_many(batch, dedup=not turns))
                bar.advance(task, len(batch))
                batch = []
        if batch:
            imported += len(store.add_many(batch, dedup=not turns))
        bar.update(task, completed=total)
    return imported


def _hit_json(h: MemoryHit) -> dict[str, Any]:
    m = h.memory
    return {
        "id": m.id,
        "content": m.content,
        "score": h.score,
        "created_at": iso(m.created_at),
        "metadata": dict(m.metadata),
    }


def _explain(h: MemoryHit, floor: float) -> dict[str, Any]:
    """What the score was made of, and whether it reaches the injection floor: the answer to
    "why was my fact not injected?" (the contract's hit shape is unchanged without it)."""
    return {
        "cosine": h.similarity,
        "keywords": h.lexical,
        "time": h.timing,
        "short_turn": h.substance,
        "reply_of": h.reply_of,
        "floor": floor,
        "above_floor": h.score >= floor,
    }


def _explain_line(e: dict[str, Any]) -> str:
    keywords = "none" if e["keywords"] is None else f"{e['keywords']:.3f}"
    parts = [f"cosine {e['cosine']:.3f}", f"keywords {keywords}", f"time {e['time']:.2f}",
             f"short turn {e['short_turn']:.2f}"]  # fmt: skip
    if e["reply_of"]:
        parts.append(f"reply to [{e['reply_of']}]")
    verdict = "above" if e["above_floor"] else "below"
    return " · ".join(parts) + f" · {verdict} the floor {e['floor']:.2f}"


@memory.command("search")
@click.argument("queries", nargs=-1)
@click.option(
    "--top-k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Hits per query."
)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read queries from stdin, one a line.")
@click.option(
    "--time-aware/--no-time-aware",
    default=None,
    help='Whether a query naming a time ("last week", "on May 3") prefers memories from '
    "then. Default: the memory_time_aware setting (on).",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show what each score is made of (cosine, keyword share, time, short-turn and reply "
    "factors) and whether it reaches the injection floor (memory_min_score).",
)
@project_options
@json_option
@config_option
def search_cmd(
    queries: tuple[str, ...],
    top_k: int,
    from_stdin: bool,
    time_aware: bool | None,
    explain: bool,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Search the project's memories (vector + keyword, fused, newer first on ties).

    With --json, prints one object per query:
    {"query": ..., "hits": [{"id", "content", "score", "created_at", "metadata"}]};
    --explain adds "explain": {"cosine", "keywords", "time", "short_turn", "reply_of",
    "floor", "above_floor"} to each hit.
    """
    wanted = list(queries)
    if from_stdin:
        wanted += [line.strip() for line in sys.stdin if line.strip()]
    if not wanted:
        raise click.UsageError("give at least one QUERY, or --stdin with one query per line")
    # Only --explain needs the floor: a plain search does not read the settings twice.
    floor = load_settings(config_file).memory_min_score if explain else 0.0
    with _store(project_id, cwd, config_file, time_aware) as (store, _):
        for q in wanted:
            hits = store.search(q, top_k=top_k, touch=False)
            if as_json:
                docs = [_hit_json(h) | ({"explain": _explain(h, floor)} if explain else {})
                        for h in hits]  # fmt: skip
                _echo_json({"query": q, "hits": docs})
                continue
            click.echo(f"{q}" if len(wanted) > 1 else "", nl=len(wanted) > 1)
            if not hits:
                click.echo("  (no memories)")
            for h in hits:
                click.echo(f"  {h.score:.3f} [{h.memory.id}] {h.memory.content}")
                if explain:
                    click.echo(f"        {_explain_line(_explain(h, floor))}")


@memory.command("list")
@click.option("--all", "include_history", is_flag=True, help="Include superseded memories.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most N memories.")
@project_options
@json_option
@config_option
def list_cmd(
    include_history: bool,
    limit: int | None,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """The project's current memories, newest first (--json: one object per line)."""
    with _store(project_id, cwd, config_file) as (store, _):
        found = store.list(include_history=include_history, limit=limit)
        path = store.path
    if as_json:
        for m in found:
            _echo_json(m.to_json())
        return
    if not found:
        click.echo(f"No memories in {path}.")
        return
    _print_table(found, str(path))


def _print_table(found: list[Memory], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("id", "created", "scope", "imp.", "content"):
        table.add_column(col, overflow="fold" if col == "content" else "ellipsis")
    for m in found:
        created = time.strftime("%Y-%m-%d", time.gmtime(m.created_at))
        label = m.scope.value + ("" if m.is_current else " (old)")
        table.add_row(m.id, created, label, f"{m.importance:.2f}", m.content)
    Console().print(table)


@memory.command("show")
@click.argument("memory_id")
@project_options
@json_option
@config_option
def show_cmd(
    memory_id: str,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """One memory with its history (supersession chain) and evidence."""
    with _store(project_id, cwd, config_file) as (store, _):
        m = store.get(memory_id)
        if m is None:
            raise MemoryNotFound(f"no memory with id {memory_id!r} in {store.path}")
        chain = store.history(memory_id)
        evidence = store.evidence(memory_id)
    doc = m.to_json()
    doc["history"] = [
        {"id": h.id, "content": h.content, "valid_until": iso(h.valid_until)} for h in chain
    ]
    doc["evidence"] = [
        {"kind": e.kind, "messageId": e.message_id, "sessionId": e.session_id} for e in evidence
    ]
    if as_json:
        _echo_json(doc)
        return
    for key in _SHOWN:
        if doc.get(key) not in (None, {}, []):
            click.echo(f"{key:>14}: {doc[key]}")
    if len(chain) > 1:
        click.echo("       history:")
        for h in chain:
            click.echo(f"                {'*' if h.id == m.id else ' '} [{h.id}] {h.content}")


@memory.command("delete")
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
    with _store(project_id, cwd, config_file) as (store, _):
        deleted = store.delete(memory_id)
        path = store.path
    if not deleted:
        raise MemoryNotFound(f"no memory with id {memory_id!r} in {path}")
    if as_json:
        _echo_json({"deleted": deleted})
    else:
        click.echo(f"Deleted {', '.join(deleted)}.")


@memory.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(WRITERS)),
    required=True,
    help="claude: MEMORY.md; codex: AGENTS.md; cursor: .cursor/rules/ember-memory.mdc; "
    "generic: EMBER_MEMORY.md.",
)
@click.option(
    "--dest",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to write into (default: the project directory; for claude, "
    "~/.claude/projects/<project>/memory).",
)
@project_options
@json_option
@config_option
def export_cmd(
    fmt: str,
    dest: Path | None,
    project_id: str | None,
    cwd: Path | None,
    as_json: bool,
    config_file: Path | None,
) -> None:
    """Write the most useful memories into an agent's own file, inside ember markers.

    Ranked by importance x recency x use, one line per distinct fact, cut to the file's
    budget (claude 2k tokens, others 3k). Text outside the markers is never changed.
    """
    writer = writer_for(fmt)
    with _store(project_id, cwd, config_file) as (store, ref):
        memories = store.list()
    root = ref.identity if ref is not None and ref.source != "header:x-ember-project-id" else None
    target = dest or default_dest(fmt, root, Path.home())
    if target is None:
        raise click.UsageError("--dest DIR is required with --project-id (no directory known)")
    result = export(memories, writer, target, time.time())
    if as_json:
        _echo_json(
            {
                "path": str(result.path),
                "memories": result.memories,
                "tokens": result.tokens,
                "changed": result.changed,
            }
        )
    else:
        state = "updated" if result.changed else "unchanged"
        click.echo(f"{result.path}: {result.memories} memories, ~{result.tokens} tokens ({state}).")
