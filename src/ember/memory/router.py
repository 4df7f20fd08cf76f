"""One memory store per project, opened on demand; isolation is enforced here and only here.

Isolation is physical: every project has its own file
(``$EMBER_HOME/projects/<name>-<16 hex>/ember.db``, see ``ember.project``), so one project's
memories cannot reach another's through a missing filter — the other file is never opened.
A request whose project cannot be resolved gets no store at all (fail closed: nothing
injected, nothing written) unless the user opted into a shared store with
``EMBER_UNRESOLVED_PROJECT=global``, which is logged as the cross-project leak risk it is.

Open stores are kept in an LRU (``memory_open_stores``, default 16) so hundreds of projects do
not exhaust file handles; the least recently used store is closed when the LRU is full. A
store never owns its file: ``Storage`` does (one owner per file, shared with accounting and
the ledger), so closing a store only drops its in-memory indexes.

The router's lock guards its dictionary only. Opening a store (reading the file, choosing its
index) happens outside it, in the caller's worker thread, so ``open_store`` — called on the
event loop — never waits behind another project's slow open.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from ember.config import Settings
from ember.memory.core import HierarchicalMemory
from ember.memory.errors import MemoryError_, store_errors
from ember.memory.scrub import scrub
from ember.memory.settings import MemorySettings
from ember.memory.share import CpuShare, MachineIdle
from ember.memory.vectors import EmbedderSource
from ember.project import ProjectRef
from ember.store.registry import Storage, storage_for

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
        storage: Storage | None = None,
        opener: Callable[[Path], HierarchicalMemory] | None = None,
    ) -> None:
        self._settings = settings
        self._embedder = embedder
        self._storage = storage or storage_for(settings)
        self._own_storage = storage is None
        self._opener = opener or self._open
        self._stores: OrderedDict[Path, HierarchicalMemory] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False
        #: the process's one budget for memory work nobody waits for (asks' searches, the
        #: vectors of background facts): every store and the ask gate draw on it
        self._options = settings.section(MemorySettings)
        self.share = CpuShare(self._options.memory_cpu_share, idle=MachineIdle())

    def _open(self, path: Path) -> HierarchicalMemory:
        """The store, with any secret an older ember kept in it masked (once per store)."""
        store = HierarchicalMemory(
            self._storage.database(path),
            self._embedder,
            vector_index=self._settings.memory_vector_index,
            time_aware=self._options.memory_time_aware,
            cpu_share=self.share,
        )
        failures: tuple[type[Exception], ...] = (MemoryError_, *store_errors())
        try:
            scrub(store)
        except failures as exc:  # the store still serves; the next open tries again
            log.warning("memory: could not mask stored secrets in %s: %s", store.where, exc)
        return store

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
        """The project's store (opened if needed: blocking, call it from a worker thread),
        or None when the project is unresolved."""
        path = self.path_for(project)
        if path is None:
            return None
        with self._lock:
            store = self._stores.get(path)
            if store is not None:
                self._stores.move_to_end(path)
                return store
        opened = self._opener(path)  # outside the lock: slow, and other projects must not wait
        fresh: HierarchicalMemory | None = opened
        with self._lock:
            store = self._stores.get(path)
            if store is None:
                store, fresh = opened, None
                self._stores[path] = store
            self._stores.move_to_end(path)
            evicted = []
            while len(self._stores) > self._options.memory_open_stores:
                evicted.append(self._stores.popitem(last=False)[1])
        if fresh is not None:
            fresh.close()  # another thread opened the same project first
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
        if self._own_storage:
            self._storage.close()
