"""``ember memory``: add, import, search, list, show, delete and export a project's memories.

Every command names its project with ``--project-id ID`` or ``--cwd PATH`` (the resolution the
proxy applies to ``x-ember-project-id`` / ``x-ember-cwd``). Without either, the command
refuses — memory is per project and a guess would write into the wrong one — unless
``EMBER_UNRESOLVED_PROJECT=global`` opted into the shared store.

Tests swap the embedder through the click context object (``obj={"embedder": factory}``);
otherwise the configured model is loaded on first need (``list``/``show``/``delete``/
``export`` never load it).

This module holds the group and the commands that read (a read never creates a project's
store); the writes are in ``cli_write.py``, finding and opening the store in
``cli_target.py``, and what is printed in ``cli_view.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ember.cmdkit import render
from ember.cmdkit.options import config_option, json_option, project_options
from ember.memory import cli_view as view
from ember.memory.cli_target import no_data, not_found, reading, resolve
from ember.memory.cli_write import add_cmd, delete_cmd, import_cmd
from ember.memory.explain import explain_hit
from ember.memory.injected import memory_use
from ember.memory.models import iso
from ember.memory.settings import MemorySettings
from ember.memory.shapes import hits_json
from ember.memory.writers import WRITERS, export, writer_for
from ember.memory.writers.base import default_dest


@click.group()
def memory() -> None:
    """Cross-session memory of one project: facts the agent gets recalled in later sessions.

    \b
    Examples:
      ember memory add --cwd ~/code/api "The API uses PostgreSQL 16"
      ember memory search --cwd ~/code/api "which database?" --json
      ember memory export --cwd ~/code/api --format claude
    """


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
    t = resolve(project_id, cwd, config_file)
    floor = t.settings.section(MemorySettings).memory_min_score
    found = []
    with reading(t, time_aware) as store:
        if store is None:
            no_data(t, as_json)
        for q in wanted:
            hits = [] if store is None else store.search(q, top_k=top_k, touch=False)
            found.append((q, hits, [explain_hit(h, floor) if explain else None for h in hits]))
    if not as_json:
        if store is not None:
            view.print_search(found)
        return
    docs = [{"query": q, "hits": hits_json(hits, ex)} for q, hits, ex in found]
    # One document either way: the object of the one QUERY given, else an array of them.
    view.echo_json(docs[0] if len(queries) == 1 and not from_stdin else docs)


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
    t = resolve(project_id, cwd, config_file)
    with reading(t) as store:
        found = [] if store is None else store.list(include_history=include_history, limit=limit)
    if as_json:
        view.echo_json([m.to_json() for m in found])
    if store is None:
        no_data(t, as_json)
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
    """One memory with its history (supersession chain), evidence (each pointer's kind and
    the message or session it points at) and how many requests it was injected into."""
    t = resolve(project_id, cwd, config_file)
    with reading(t) as store:
        m = None if store is None else store.get(memory_id)
        if store is None or m is None:
            raise not_found(memory_id, t, store is not None)
        chain = store.history(memory_id)
        evidence = store.evidence(memory_id)
        use = store.database.read(lambda c: memory_use(c, memory_id, listed=0))
    doc = m.to_json()
    doc["history"] = [
        {"id": h.id, "content": h.content, "valid_until": iso(h.valid_until)} for h in chain
    ]
    doc["evidence"] = [view.evidence_json(e.kind, e.message_id, e.session_id) for e in evidence]
    doc["injections"] = view.injections_json(use)
    if as_json:
        view.echo_json(doc)
    else:
        view.print_memory(doc, m.id)


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
    t = resolve(project_id, cwd, config_file)
    ref = t.ref
    root = ref.identity if ref is not None and ref.source != "header:x-ember-project-id" else None
    target = dest or default_dest(fmt, root, Path.home())
    if target is None:
        raise click.UsageError("--dest DIR is required with --project-id (no directory known)")
    with reading(t) as store:
        memories = [] if store is None else store.list()
    if store is None:  # nothing to export: no file is written either
        no_data(t, as_json)
        if as_json:
            path = target / writer.filename
            view.echo_json({"path": str(path), "memories": 0, "tokens": 0, "changed": False})
        return
    result = export(memories, writer, target, time.time())
    if as_json:
        view.echo_json(
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


memory.add_command(add_cmd)
memory.add_command(import_cmd)
memory.add_command(delete_cmd)
