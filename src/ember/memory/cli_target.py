"""Which project an ``ember memory`` command acts on, and its store opened for a read or a write.

Every command names its project with ``--project-id ID`` or ``--cwd PATH``; without either,
``resolve`` refuses, since memory is per project and a guess would write into the wrong one.
A read creates nothing (``reading`` yields None for a project without ember data: a mistyped
--cwd used to leave a folder and an empty database behind); a write first checks that the home
and the file are writable (``writing``). Either way the store runs on its own short-lived
database owner, closed with the command, and a file-level failure is one line with a fix
(``access.database``).

The embedder is loaded on first need only; tests swap it through the click context object
(``obj={"embedder": factory}``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import click

from ember.cmdkit import access
from ember.config import Settings, load_settings
from ember.embedder.base import Embedder
from ember.errors import ProjectError
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryNotFound
from ember.memory.router import MemoryRouter
from ember.memory.settings import MemorySettings
from ember.project import ProjectRef, project_from_cli
from ember.store.database import Database
from ember.store.schema import PROJECT

EmbedderFactory = Callable[[], Embedder]


def _embedder_factory(settings: Settings) -> EmbedderFactory:
    override = (click.get_current_context().find_object(dict) or {}).get("embedder")
    if override is not None:
        return override  # type: ignore[no-any-return]

    def load() -> Embedder:
        from ember.embedder import embedder_from

        return embedder_from(settings)

    return load


@dataclasses.dataclass(frozen=True)
class Target:
    """The project a command names, and its database file."""

    settings: Settings
    ref: ProjectRef | None
    path: Path


def resolve(project_id: str | None, cwd: Path | None, config_file: Path | None) -> Target:
    """The project the options name, resolved as the proxy resolves its headers; no project
    is a ``ProjectError`` unless ``EMBER_UNRESOLVED_PROJECT=global`` opted into one store."""
    settings = load_settings(config_file)
    ref = project_from_cli(project_id, str(cwd) if cwd else None, settings.project_identity)
    path = MemoryRouter(settings, None).path_for(ref)
    if path is None:
        raise ProjectError(
            "no project given: pass --project-id ID or --cwd PATH (memories are kept per "
            "project; EMBER_UNRESOLVED_PROJECT=global opts into one shared store)"
        )
    return Target(settings, ref, path)


def _owner(t: Target) -> AbstractContextManager[Database]:
    """A short-lived owner of the project's data: its schema when ``store_url`` is set (the
    memories the proxy keeps there), else its file."""
    if t.settings.store_url is not None:
        return access.pg_database(t.settings, t.path, PROJECT)
    return access.database(t.path, PROJECT, vec=t.settings.memory_vector_index != "hnsw")


def _exists(t: Target) -> bool:
    """Whether the project has ember data: its schema on the server, else its file."""
    if t.settings.store_url is not None:
        with access.pg_database(t.settings, t.path, PROJECT) as db:
            return db.exists()
    return access.existing(t.settings.home, t.path)


@contextmanager
def _opened(t: Target, time_aware: bool | None = None) -> Iterator[HierarchicalMemory]:
    """The project's store on its own short-lived database owner (the caller checked the
    file or schema); a storage failure is one line with a fix (``access``)."""
    vector_index = t.settings.memory_vector_index
    if time_aware is None:
        time_aware = t.settings.section(MemorySettings).memory_time_aware
    with _owner(t) as db:
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
def reading(t: Target, time_aware: bool | None = None) -> Iterator[HierarchicalMemory | None]:
    """The store, or None when the project has no ember data yet: a read creates nothing
    (it used to leave a folder and an empty database behind for any --cwd typed)."""
    if not _exists(t):
        yield None
        return
    with _opened(t, time_aware) as store:
        yield store


@contextmanager
def writing(t: Target) -> Iterator[HierarchicalMemory]:
    """The store, created if needed, once the home and the file are known to be writable
    (on PostgreSQL the server says so at the first write)."""
    if t.settings.store_url is None:
        access.writable(t.settings.home, t.path)
    with _opened(t) as store:
        yield store


def no_data(t: Target, as_json: bool) -> None:
    """One line: the project has nothing yet (on stderr with --json: stdout stays JSON)."""
    click.echo(access.no_data(t.path), err=as_json)


def not_found(memory_id: str, t: Target, present: bool) -> MemoryNotFound:
    if present:
        return MemoryNotFound(f"no memory with id {memory_id!r} in {t.path}")
    return MemoryNotFound(
        f"no memory with id {memory_id!r}: {access.no_data(t.path, 'the project')}"
    )


def warn_unembedded(store: HierarchicalMemory) -> None:
    if store.embedder_error is not None:
        click.echo(
            f"note: the embedder is unavailable ({store.embedder_error}); memories are stored "
            "and found by keywords, and get vectors once it loads",
            err=True,
        )
