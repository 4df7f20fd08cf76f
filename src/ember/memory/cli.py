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

from ember.cli import access, render
from ember.cli.options import config_option, json_option, project_options
from ember.config import Settings, load_settings
from ember.errors import ProjectError
from ember.memory import cli_view as view
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryInputError, MemoryNotFound
from ember.memory.importing import parse_lines
from ember.memory.models import TURN, MemoryHit, NewMemory, iso
from ember.memory.router import MemoryRouter
from ember.memory.settings import MemorySettings
from ember.memory.writers import WRITERS, export, writer_for
from ember.memory.writers.base import default_dest
from ember.models.base import Embedder
from ember.project import ProjectRef, project_from_cli
from ember.store.schema import PROJECT

EmbedderFactory = Callable[[], Embedder]
_BATCH = 256


def _embedder_factory(settings: Settings) -> EmbedderFactory:
    override = (click.get_current_context().find_object(dict) or {}).get("embedder")
    if override is not None:
        return override  # type: ignore[no-any-return]

    def load() -> Embedder:
        from ember.models import embedder_from

        return embedder_from(settings)

    return load


@dataclasses.dataclass(frozen=True)
class _Target:
    """The project a command names, and its database file."""

    settings: Settings
    ref: ProjectRef | None
    path: Path


def _target(project_id: str | None, cwd: Path | None, config_file: Path | None) -> _Target:
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None)
    path = MemoryRouter(settings, None).path_for(ref)
    if path is None:
        raise ProjectError(
            "no project given: pass --project-id ID or --cwd PATH (memories are kept per "
            "project; EMBER_UNRESOLVED_PROJECT=global opts into one shared store)"
        )
    return _Target(settings, ref, path)


@contextmanager
def _opened(t: _Target, time_aware: bool | None = None) -> Iterator[HierarchicalMemory]:
    """The project's store on its own short-lived database owner (the caller checked the
    file); a file-level failure is one line with a fix (``access.database``)."""
    vector_index = t.settings.memory_vector_index
    if time_aware is None:
        time_aware = t.settings.section(MemorySettings).memory_time_aware
    with access.database(t.path, PROJECT, vec=vector_index != "hnsw") as db:
        store = HierarchicalMemory(
            db,
            _embedder_factory(t.settings),
            vector_index=vector_index,
            time_aware=time_aware,
        )
        try:
            yield store
        finally:
            store.close()


@contextmanager
def _reading(t: _Target, time_aware: bool | None = None) -> Iterator[HierarchicalMemory | None]:
    """The store, or None when the project has no ember data yet: a read creates nothing
    (it used to leave a folder and an empty database behind for any --cwd typed)."""
    if not access.existing(t.settings.home, t.path):
        yield None
        return
    with _opened(t, time_aware) as store:
        yield store


@contextmanager
def _writing(t: _Target) -> Iterator[HierarchicalMemory]:
    """The store, created if needed, once the home and the file are known to be writable."""
    access.writable(t.settings.home, t.path)
    with _opened(t) as store:
        yield store


def _no_data(t: _Target, as_json: bool) -> None:
    """One line: the project has nothing yet (on stderr with --json: stdout stays JSON)."""
    click.echo(access.no_data(t.path), err=as_json)


def _not_found(memory_id: str, t: _Target, present: bool) -> MemoryNotFound:
    if present:
        return MemoryNotFound(f"no memory with id {memory_id!r} in {t.path}")
    return MemoryNotFound(
        f"no memory with id {memory_id!r}: {access.no_data(t.path, 'the project')}"
    )


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
    with _writing(_target(project_id, cwd, config_file)) as store:
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
    with _writing(_target(project_id, cwd, config_file)) as store:
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


def _hits_json(hits: list[MemoryHit], explained: list[dict[str, Any] | None]) -> list[Any]:
    """The contract's hit shape; --explain adds "explain" to each hit."""
    return [
        _hit_json(h) | ({"explain": e} if e is not None else {})
        for h, e in zip(hits, explained, strict=True)
    ]


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

    With --json, prints one JSON document: for one QUERY its object
    {"query": ..., "hits": [{"id", "content", "score", "created_at", "metadata"}]}, for
    several (or --stdin) an array of them, one per query; --explain adds "explain":
    {"cosine", "keywords", "time", "short_turn", "reply_of", "floor", "above_floor"} to
    each hit.
    """
    wanted = list(queries)
    if from_stdin:
        wanted += [line.strip() for line in sys.stdin if line.strip()]
    if not wanted:
        raise click.UsageError("give at least one QUERY, or --stdin with one query per line")
    t = _target(project_id, cwd, config_file)
    floor = t.settings.section(MemorySettings).memory_min_score
    found = []
    with _reading(t, time_aware) as store:
        if store is None:
            _no_data(t, as_json)
        for q in wanted:
            hits = [] if store is None else store.search(q, top_k=top_k, touch=False)
            found.append((q, hits, [_explain(h, floor) if explain else None for h in hits]))
    if not as_json:
        if store is not None:
            view.print_search(found)
        return
    docs = [{"query": q, "hits": _hits_json(hits, ex)} for q, hits, ex in found]
    # One document either way: the object of the one QUERY given, else an array of them.
    _echo_json(docs[0] if len(queries) == 1 and not from_stdin else docs)


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
    """The project's current memories, newest first (--json: one array, [] when none)."""
    t = _target(project_id, cwd, config_file)
    with _reading(t) as store:
        found = [] if store is None else store.list(include_history=include_history, limit=limit)
    if as_json:
        _echo_json([m.to_json() for m in found])
    if store is None:
        _no_data(t, as_json)
    elif not as_json and not found:
        render.say(f"No memories in {t.path}.")
    elif not as_json:
        view.print_list(found, str(t.path))


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
    """One memory with its history (supersession chain) and evidence: each pointer's kind
    and the message or session it points at."""
    t = _target(project_id, cwd, config_file)
    with _reading(t) as store:
        m = None if store is None else store.get(memory_id)
        if store is None or m is None:
            raise _not_found(memory_id, t, store is not None)
        chain = store.history(memory_id)
        evidence = store.evidence(memory_id)
    doc = m.to_json()
    doc["history"] = [
        {"id": h.id, "content": h.content, "valid_until": iso(h.valid_until)} for h in chain
    ]
    doc["evidence"] = [view.evidence_json(e.kind, e.message_id, e.session_id) for e in evidence]
    if as_json:
        _echo_json(doc)
    else:
        view.print_memory(doc, m.id)


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
    t = _target(project_id, cwd, config_file)
    if not access.existing(t.settings.home, t.path):
        raise _not_found(memory_id, t, False)
    with _writing(t) as store:
        deleted = store.delete(memory_id)
    if not deleted:
        raise _not_found(memory_id, t, True)
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
    t = _target(project_id, cwd, config_file)
    ref = t.ref
    root = ref.identity if ref is not None and ref.source != "header:x-ember-project-id" else None
    target = dest or default_dest(fmt, root, Path.home())
    if target is None:
        raise click.UsageError("--dest DIR is required with --project-id (no directory known)")
    with _reading(t) as store:
        memories = [] if store is None else store.list()
    if store is None:  # nothing to export: no file is written either
        _no_data(t, as_json)
        if as_json:
            path = target / writer.filename
            _echo_json({"path": str(path), "memories": 0, "tokens": 0, "changed": False})
        return
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
