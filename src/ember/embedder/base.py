"""The embedder interface every retrieval component depends on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt


class Embedder(Protocol):
    """Turns texts into unit-length vectors.

    ``embed`` returns a float32 array of shape ``(len(texts), dim)`` whose rows have L2 norm 1,
    so a dot product is the cosine similarity. It is deterministic: the same text gives the
    same vector in every process, which keeps rankings (and the bytes ember injects) stable.
    ``name`` identifies backend and model (``"onnx:all-MiniLM-L6-v2"``); vectors from
    embedders with different names are never mixed in one index.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
