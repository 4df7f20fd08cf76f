"""One memory store per project, opened on demand; isolation is enforced here and only here.

Isolation is physical: every project has its own file
(``$EMBER_HOME/projects/<name>-<16 hex>/ember.db``, see ``ember.project``), so one project's
memories cannot reach another's through a missing filter — the other file is never opened.
A request whose project cannot be resolved gets no store at all (fail closed: nothing
injected, nothing written) unless the user opted into a shared store with
``EMBER_UNRESOLVED_PROJECT=global``, which is logged as the cross-project leak risk it is.

Open stores are kept in an LRU (``memory_open_stores``, default 16) so hundreds of projects do
not exhaust file handles; the least recently used store is closed when the LRU is full.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from ember.config import Settings
from ember.memory.core import HierarchicalMemory
from ember.memory.vectors import EmbedderSource
from ember.project import ProjectRef

log = logging.getLogger(__name__)

#: Where the opt-in shared store lives: outside ``projects/`` so no project name can hit it.
GLOBAL_DIR = "global"


def global_db_path(home: Path) -> Path:
    return home / GLOBAL_DIR / "ember.db"


class MemoryRouter:
    def __init__(
        self,
        settings: Settings,
        embedder: EmbedderSource | None,
        *,
        opener: Callable[[Path], HierarchicalMemory] | None = None,
    ) -> None:
        self._settings = settings
        self._embedder = embedder
        self._opener = opener or self._open
        self._stores: OrderedDict[Path, HierarchicalMemory] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False

    def _open(self, path: Path) -> HierarchicalMemory:
        return HierarchicalMemory(
            path, self._embedder, vector_index=self._settings.memory_vector_index
        )

    def path_for(self, project: ProjectRef | None) -> Path | None:
        """The database a project's memories live in; None means fail closed."""
        if project is not None:
            return project.db_path(self._settings.home)
        if self._settings.unresolved_project != "global":
            return None
        if not self._warned:
            self._warned = True
            log.warning(
                "EMBER_UNRESOLVED_PROJECT=global: requests without a project share one memory "
                "store (%s); memories of one project can be injected into another",
                global_db_path(self._settings.home),
            )
        return global_db_path(self._settings.home)

    def open_store(self, project: ProjectRef | None) -> HierarchicalMemory | None:
        """The project's store if it is already open (no I/O: the request path's fast way)."""
        path = self.path_for(project)
        with self._lock:
            return self._stores.get(path) if path is not None else None

    def for_project(self, project: ProjectRef | None) -> HierarchicalMemory | None:
        """The project's store (opened if needed), or None when the project is unresolved."""
        path = self.path_for(project)
        if path is None:
            return None
        with self._lock:
            store = self._stores.pop(path, None)
            if store is None:
                store = self._opener(path)
            self._stores[path] = store
            evicted = []
            while len(self._stores) > self._settings.memory_open_stores:
                evicted.append(self._stores.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return store

    def open_paths(self) -> list[Path]:
        with self._lock:
            return list(self._stores)

    def close(self) -> None:
        with self._lock:
            stores = list(self._stores.values())
            self._stores.clear()
        for s in stores:
            s.close()
