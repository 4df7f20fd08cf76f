"""The built ONNX graph, kept on disk (``$EMBER_HOME/models/<key>/``) and memory-mapped.

Why on disk rather than built in memory at every start:

- Memory. A session created from in-memory bytes holds its own heap copy of the 90 MB of
  weights, on top of the transient copies made while building (~180 MB more RSS in a proxy that
  idles at ~50 MB). From a file whose tensors are external data, onnxruntime maps the weights;
  only the pages it touches count, they are shared by every ember process, and the kernel can
  drop them under pressure.
- Start-up. A cache hit skips reading the safetensors, building the graph and importing the
  ``onnx`` package (about 0.6 s of import alone).

The key is a digest of ``GRAPH_VERSION``, ``config.json`` and ``model.safetensors``: a different
checkpoint, or a change to ``graph.py`` (which must bump ``GRAPH_VERSION``), gets a new
directory instead of a stale graph. An entry is written in a temporary directory and renamed
into place, so a crash mid-write, or two processes building at once, never leave a half-written
model that a later start would load.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ember.memory.embed.checkpoint import read_weights
from ember.memory.embed.files import ModelFiles
from ember.memory.embed.spec import ModelSpec

if TYPE_CHECKING:
    import onnx

#: Bump whenever graph.py changes what it builds.
GRAPH_VERSION = "1"
MODEL_FILE = "model.onnx"
DATA_FILE = "model.onnx.data"


def cache_key(files: ModelFiles, fused_attention: bool) -> str:
    """Digest of what the graph is built from (about 0.1 s for 90 MB of weights)."""
    digest = hashlib.sha256(f"ember-graph-{GRAPH_VERSION}-{fused_attention}\0".encode())
    for path in (files.config, files.weights):
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def build_model(files: ModelFiles, spec: ModelSpec, fused_attention: bool) -> onnx.ModelProto:
    """Build the graph in memory. ``graph`` (and with it ``onnx``) is imported only here, so a
    start-up that finds its graph on disk never pays for that import."""
    from ember.memory.embed.graph import build_graph

    return build_graph(spec, read_weights(files.weights), fused_attention)


def compiled_model(
    files: ModelFiles, spec: ModelSpec, cache_dir: Path, fused_attention: bool
) -> Path:
    """Path of the cached ``model.onnx``, building it first when absent.

    Raises ``OSError`` when ``cache_dir`` cannot be written (the caller builds in memory
    instead) and ``EmbedderUnavailable`` when the weights themselves are unusable.
    """
    target = cache_dir / cache_key(files, fused_attention)
    model_path = target / MODEL_FILE
    if model_path.is_file() and (target / DATA_FILE).is_file():
        return model_path
    import onnx  # only on a miss: see build_model

    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_dir))
    try:
        onnx.save_model(
            build_model(files, spec, fused_attention),
            str(staging / MODEL_FILE),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=DATA_FILE,
            size_threshold=1024,
        )
        try:
            staging.rename(target)
        except OSError:
            if not model_path.is_file():
                raise
            # Another process renamed its (identical) build into place first: use theirs.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model_path


def discard(model_path: Path) -> None:
    """Remove a cache entry that onnxruntime refused, so the next start rebuilds it."""
    shutil.rmtree(model_path.parent, ignore_errors=True)
