"""One embedder per ``(backend, model)`` per process, loaded in the background.

Two failures this module exists to prevent:

- Reloading the model for every project: memory stores are opened per project (one SQLite file
  each), and a store that built its own embedder would spend a second and 100+ MB per project
  opened. ``get_embedder`` returns the same object for the same ``(backend, model)`` to every
  caller in the process, and concurrent first callers wait for one load instead of racing.
- Blocking start-up on the model: ``preload`` returns at once with an ``EmbedderLoader``; the
  proxy serves requests immediately and skips memory work while ``loader.ready()`` is false.

A failed load is remembered for ``retry_after`` seconds (so a missing model does not cost a
hub round-trip on every request), then the next caller tries again. A request path that wants
that retry calls ``preload_from(settings)`` per request (a dict lookup under a lock) rather than
keeping the first handle forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ember.config import Settings
from ember.embedder.base import Embedder
from ember.embedder.compiled import user_models_dir
from ember.embedder.errors import EmbedderError, EmbedderNotReady, EmbedderUnavailable
from ember.embedder.files import DEFAULT_MODEL, Backend, canonical_model, locate

log = logging.getLogger(__name__)

BACKENDS: tuple[Backend, ...] = ("onnx", "hub")
#: ``(backend, model, cache_dir) -> Embedder``; ``load_embedder`` in production.
Loader = Callable[[Backend, str, Path | None], Embedder]


def load_embedder(backend: Backend, model: str, cache_dir: Path | None = None) -> Embedder:
    """Load ``model`` now, in the calling thread, bypassing the process cache.

    Whichever source the files come from, the vectors are those of the ONNX graph, so the
    ``name`` (what an index records) is ``onnx:<model>`` for both backends: switching a user
    from the hub to the offline package must not make their stored vectors look incompatible.

    onnxruntime, tokenizers and onnx are imported here, not when this package is imported:
    they cost ~0.7 s, which would otherwise be spent before the proxy can answer anything.
    """
    from ember.embedder.runtime import load_onnx_embedder

    files = locate(backend, model)
    return load_onnx_embedder(files, f"onnx:{canonical_model(model)}", cache_dir=cache_dir)


class EmbedderLoader:
    """A handle on one load running in a daemon thread.

    A daemon thread, so a download that hangs never holds up the process's exit; the load's
    onnxruntime part is waited for at exit instead of being cut off mid-call (``exitguard``:
    that cut-off aborted ``make demo``).

    ``ready()`` never blocks: it is what a request path checks before doing memory work.
    ``get(timeout)`` waits, then returns the embedder or raises what the load raised
    (``EmbedderUnavailable``), or ``EmbedderNotReady`` if the timeout ran out first.
    """

    def __init__(self, backend: Backend, model: str, cache_dir: Path | None, load: Loader) -> None:
        self.backend = backend
        self.model = model
        self._cache_dir = cache_dir
        self._load = load
        self._done = threading.Event()
        self._embedder: Embedder | None = None
        self._error: EmbedderError | None = None
        self.finished_at: float | None = None

    def start(self) -> EmbedderLoader:
        threading.Thread(target=self._run, name=f"ember-embedder-{self.model}", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            self._embedder = self._load(self.backend, self.model, self._cache_dir)
        except EmbedderError as exc:
            self._error = exc
        except Exception as exc:  # a bug or a library failure: reported, never a dead thread
            self._error = EmbedderUnavailable(f"loading {self.model} failed: {exc!r}")
            self._error.__cause__ = exc
        if self._error is not None:
            log.warning("embedder %s (%s) unavailable: %s", self.model, self.backend, self._error)
        self.finished_at = time.monotonic()
        self._done.set()

    def ready(self) -> bool:
        """True once the embedder is loaded and usable; False while loading or after failure."""
        return self._done.is_set() and self._embedder is not None

    def done(self) -> bool:
        """True once the load has finished, successfully or not."""
        return self._done.is_set()

    @property
    def error(self) -> EmbedderError | None:
        """Why the load failed, once it has; ``None`` while loading or after success."""
        return self._error if self._done.is_set() else None

    def get(self, timeout: float | None = None) -> Embedder:
        if not self._done.wait(timeout):
            raise EmbedderNotReady(
                f"embedder {self.model} is still loading (waited {timeout}s); try again shortly"
            )
        if self._embedder is None:
            assert self._error is not None
            raise self._error
        return self._embedder


class EmbedderCache:
    """Loaders by ``(backend, canonical model)``; thread-safe. The process uses ``DEFAULT``;
    tests build their own with a fake ``load``."""

    def __init__(self, load: Loader = load_embedder, retry_after: float = 300.0) -> None:
        self._load = load
        self._retry_after = retry_after
        self._lock = threading.Lock()
        self._loaders: dict[tuple[str, str], EmbedderLoader] = {}

    def preload(
        self,
        backend: Backend = "onnx",
        model: str = DEFAULT_MODEL,
        cache_dir: Path | None = None,
    ) -> EmbedderLoader:
        """Start loading (once) and return the handle at once.

        ``cache_dir`` is where the built graph is kept (see ``compiled``); it is not part of
        the key, because the vectors do not depend on it: the first caller's choice stands.
        """
        if backend not in BACKENDS:
            raise EmbedderUnavailable(
                f"unknown embedder backend {backend!r}; use one of {', '.join(BACKENDS)}"
            )
        key = (backend, canonical_model(model))
        with self._lock:
            loader = self._loaders.get(key)
            if loader is None or self._expired_failure(loader):
                loader = EmbedderLoader(backend, key[1], cache_dir, self._load).start()
                self._loaders[key] = loader
            return loader

    def get(
        self,
        backend: Backend = "onnx",
        model: str = DEFAULT_MODEL,
        cache_dir: Path | None = None,
        timeout: float | None = None,
    ) -> Embedder:
        """The shared embedder, loading it first if needed (blocking up to ``timeout``)."""
        return self.preload(backend, model, cache_dir).get(timeout)

    def clear(self) -> None:
        """Forget every loader; embedders still referenced elsewhere stay usable."""
        with self._lock:
            self._loaders.clear()

    def _expired_failure(self, loader: EmbedderLoader) -> bool:
        finished = loader.finished_at
        return (
            loader.error is not None
            and finished is not None
            and time.monotonic() - finished >= self._retry_after
        )


DEFAULT = EmbedderCache()


def get_embedder(
    backend: Backend = "onnx", model: str = DEFAULT_MODEL, cache_dir: Path | None = None
) -> Embedder:
    """The process-wide embedder for ``(backend, model)``; blocks until it is loaded.

    Raises ``EmbedderUnavailable`` (with the install command) when no weights can be found.
    """
    return DEFAULT.get(backend, model, cache_dir)


def preload(
    backend: Backend = "onnx", model: str = DEFAULT_MODEL, cache_dir: Path | None = None
) -> EmbedderLoader:
    """Start loading the process-wide embedder in the background; returns immediately."""
    return DEFAULT.preload(backend, model, cache_dir)


def models_dir(settings: Settings) -> Path:
    """Where built graphs are cached: the ``models_dir`` setting, else the per-user cache
    (``$XDG_CACHE_HOME/ember/models``), the same for every ``EMBER_HOME``."""
    if settings.models_dir is not None:
        return settings.models_dir.expanduser()
    return user_models_dir()


def preload_from(settings: Settings) -> EmbedderLoader:
    """What the proxy calls at start-up: the configured model, loading in the background,
    its graph cached in ``models_dir(settings)``."""
    return preload(settings.embed_backend, settings.embed_model, models_dir(settings))


def embedder_from(settings: Settings) -> Embedder:
    """What a CLI command calls: the configured model, loaded now (blocking)."""
    return get_embedder(settings.embed_backend, settings.embed_model, models_dir(settings))
