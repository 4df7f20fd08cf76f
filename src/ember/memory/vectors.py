"""Getting vectors from an embedder that may not be ready yet (the proxy never waits for it).

``HierarchicalMemory`` is given an embedder or a zero-argument factory (``get_embedder``). A
factory that raises ``EmbedderError`` (still loading, no weights) is asked again next time;
meanwhile memories are stored and found by keywords only, and their vectors are filled in
(``backfill``) once the embedder answers. Nothing blocks start-up on a model load.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ember.bounded import Bounded
from ember.embedder.base import Embedder
from ember.embedder.errors import EmbedderError
from ember.memory.index.base import Vectors

log = logging.getLogger(__name__)

EmbedderSource = Embedder | Callable[[], Embedder]


class EmbedderSlot:
    """Holds the embedder once it could be obtained."""

    def __init__(self, source: EmbedderSource | None) -> None:
        self._source = source
        self._embedder: Embedder | None = None
        self.error: Exception | None = None  # why the last attempt failed (for the CLI)
        # An embedder has ``embed``; a factory (a function, or a class) is called for one.
        if source is not None and not isinstance(source, type) and hasattr(source, "embed"):
            self._embedder = source  # type: ignore[assignment]

    def get(self) -> Embedder | None:
        if self._embedder is None and self._source is not None:
            try:
                self._embedder = self._source()  # type: ignore[operator]
                self.error = None
            except EmbedderError as exc:
                self.error = exc
                log.debug("embedder not available yet: %s", exc)
        return self._embedder


def embed(embedder: Embedder, texts: Sequence[str]) -> Vectors | None:
    """Unit-length float32 rows for ``texts``, or None when the embedder failed (fail open)."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    try:
        out = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    except EmbedderError as exc:
        log.warning("embedding failed, storing without vectors for now: %s", exc)
        return None
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


class _QueryView:
    """An embedder whose ``embed`` is another's ``embed_query`` (so ``embed`` can wrap it)."""

    def __init__(self, inner: Embedder, fn: Callable[[list[str]], object]) -> None:
        self.name, self.dim, self._fn = inner.name, inner.dim, fn

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(self._fn(list(texts)), dtype=np.float32)


def embed_query(embedder: Embedder, texts: Sequence[str]) -> Vectors | None:
    """Like ``embed``, for search queries: an embedder trained with distinct query and passage
    inputs (e5's "query: " / "passage: ") says so with an ``embed_query`` method."""
    as_query = getattr(embedder, "embed_query", None)
    if as_query is None:
        return embed(embedder, texts)
    return embed(_QueryView(embedder, as_query), texts)


def cosine_zero(embedder: Embedder | None) -> float:
    """The cosine this embedder gives unrelated text (0 unless it declares ``cosine_zero``):
    e5 models score everything ~0.7, so their cosine is rescaled before fusion."""
    return float(getattr(embedder, "cosine_zero", 0.0)) if embedder is not None else 0.0


class QueryVectors:
    """The vectors of the last query inputs, by embedder and text (thread-safe).

    A query vector is most of what memory adds to a request (~3 ms of CPU for an ask's own
    15-20 word pieces, ~30 ms for 256); the same input comes back (a client's retry, an ask
    replayed after a compaction, two agents asking the same) and gets the very same row,
    read-only."""

    def __init__(self, capacity: int = 256) -> None:
        self._rows: Bounded[tuple[str, str], Vectors] = Bounded(capacity)
        self._lock = threading.Lock()
        #: rows served from here, and rows that had to be computed
        self.reused = 0
        self.computed = 0

    def get(self, embedder: str, text: str) -> Vectors | None:
        with self._lock:
            row = self._rows.get((embedder, text))
            if row is None:
                self.computed += 1
            else:
                self.reused += 1
            return row

    def put(self, embedder: str, text: str, row: Vectors) -> None:
        row.flags.writeable = False
        with self._lock:
            self._rows.put((embedder, text), row)
