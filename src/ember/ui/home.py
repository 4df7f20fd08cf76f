"""The projects of one home, and the kernel's reads run over them (``data.py``).

A project is a folder under ``$EMBER_HOME/projects`` holding an ``ember.db``; the opt-in
global store (``global/ember.db``) and ``stats.db`` (requests whose project was not resolved)
are listed beside them. A project's reads are cached until its files change (the database or
its WAL: the proxy commits there), so the page's first paint on a year of data is one scan
per project, and a reload with nothing new is free.

On a PostgreSQL store (``store_url``) nothing is kept in the home: the projects are the
schemas the server holds (``store/pg/catalog.py``), each under the folder name its schema
maps back to, and a project has changed when its schema's write counter has (any proxy's
commit moves it, as any process's commit moves a file's WAL).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ember.store.registry import Storage, stats_db_path
from ember.store.schema import PROJECT, STATS
from ember.ui import data
from ember.views import GLOBAL

T = TypeVar("T")
UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Project:
    """``name``: the folder (what the page and the routes use); ``kind``: project, global or
    unresolved (``stats.db``: token counts only)."""

    name: str
    path: Path
    kind: str

    def stamp(self) -> tuple[float, ...]:
        """Changes whenever a write lands (the file or its WAL)."""
        out = []
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                st = p.stat()
            except OSError:
                out.append(0.0)
                continue
            out.extend((st.st_mtime, float(st.st_size)))
        return tuple(out)


def projects(home: Path, storage: Storage | None = None) -> list[Project]:
    """Every project of ``home`` that has a database (on ``storage``'s PostgreSQL when it
    keeps one), sorted by folder name."""
    if storage is not None and storage.postgres:
        return _on_postgres(home, storage)
    found = [
        Project(d.name, d / "ember.db", "project")
        for d in sorted((home / "projects").glob("*"))
        if (d / "ember.db").is_file()
    ]
    if (home / GLOBAL / "ember.db").is_file():
        found.append(Project(GLOBAL, home / GLOBAL / "ember.db", "global"))
    if stats_db_path(home).is_file():
        found.append(Project(UNRESOLVED, stats_db_path(home), "unresolved"))
    return found


def _on_postgres(home: Path, storage: Storage) -> list[Project]:
    found, extra = [], []
    for path in storage.paths():
        if path == stats_db_path(home):
            extra.append(Project(UNRESOLVED, path, "unresolved"))
        elif path.parent.name == GLOBAL and path.parent.parent == home:
            extra.insert(0, Project(GLOBAL, path, "global"))
        else:
            found.append(Project(path.parent.name, path, "project"))
    return sorted(found, key=lambda p: p.name) + extra


class HomeReader:
    """The kernel's reads over a home's projects through ``storage`` (the proxy's own when the
    proxy serves the page), each cached until that project's files change."""

    def __init__(self, home: Path, storage: Storage) -> None:
        self.home = home
        self.storage = storage
        self._cache: dict[tuple[str, str], tuple[tuple[float, ...], Any]] = {}
        self._lock = threading.Lock()

    def read(self, project: Project, fn: Callable[[Any], T]) -> T:
        schema = STATS if project.kind == "unresolved" else PROJECT
        return self.storage.database(project.path, schema).read(fn)

    def projects(self) -> list[Project]:
        return projects(self.home, self.storage)

    def stamp(self, project: Project) -> tuple[float, ...]:
        """Changes whenever a write lands in ``project``: its files, or its schema's counter."""
        if not self.storage.postgres:
            return project.stamp()
        schema = STATS if project.kind == "unresolved" else PROJECT
        return (float(self.storage.database(project.path, schema).data_version()),)

    def cached(self, project: Project, key: str, fn: Callable[[Any], T]) -> T:
        stamp = self.stamp(project)
        with self._lock:
            hit = self._cache.get((project.name, key))
        if hit is not None and hit[0] == stamp:
            value: T = hit[1]
            return value
        value = self.read(project, fn)
        with self._lock:
            self._cache[(project.name, key)] = (stamp, value)
        return value

    def find(self, name: str) -> Project | None:
        return next((p for p in self.projects() if p.name == name), None)

    def overview(self) -> list[dict[str, Any]]:
        """Each project with its identity (what requests named it), requests and spend."""
        out = []
        for p in self.projects():
            tally = data.Tally()
            tally.add(self.cached(p, "total", data.total))
            last, identity = self.cached(p, "latest", data.latest)
            out.append(
                {"name": p.name, "kind": p.kind, "identity": identity, "last_id": last}
                | tally.to_json()
            )
        return out

    def spend(
        self, days: int, by: str, only: str | None = None, now: float | None = None
    ) -> data.Spend:
        today = int((now if now is not None else time.time()) // data.DAY)
        spend = data.Spend(first_day=today - days + 1, days=days, by=by)
        since = float(spend.first_day * data.DAY)
        for p in self.projects():
            if only is not None and p.name != only:
                continue
            rows = self.cached(p, f"daily:{since}", functools.partial(data.daily, since=since))
            spend.add(p.name, rows)
        return spend
