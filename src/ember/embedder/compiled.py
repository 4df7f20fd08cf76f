"""The built ONNX graph, kept on disk in the per-user models cache and memory-mapped.

Why on disk rather than built in memory at every start:

- Memory. A session created from in-memory bytes holds its own heap copy of the 90 MB of
  weights, on top of the transient copies made while building (~180 MB more RSS in a proxy that
  idles at ~50 MB). From a file whose tensors are external data, onnxruntime maps the weights;
  only the pages it touches count, they are shared by every ember process, and the kernel can
  drop them under pressure.
- Start-up. A cache hit skips reading the safetensors, building the graph and importing the
  ``onnx`` package (about 0.6 s of import alone).

Where: one cache per user (``user_models_dir``: ``$XDG_CACHE_HOME/ember/models``, else
``~/.cache/ember/models``; the ``models_dir`` setting overrides it), shared by every
``EMBER_HOME``, so the demo's throw-away homes, tests and a user's several homes reuse one
87 MB entry instead of building and keeping one each.

An entry is ``<model>-<key>/`` holding ``model.onnx``, ``model.onnx.data`` and ``last-used``.
The key is a digest of ``GRAPH_VERSION``, ``config.json`` and ``model.safetensors``: a different
checkpoint, or a change to ``graph.py`` (which must bump ``GRAPH_VERSION``), gets a new entry
instead of a stale graph; the model name in front lets ``prune`` tell an older entry of the same
model from another model's.

Atomic: an entry is written in a ``.build-*`` directory beside it, flushed to disk (``fsync``),
and renamed into place; it is removed by renaming it to ``.trash-*`` first. So a process sees an
entry complete or not at all: a crash mid-write, or two processes building at once, never leave
a half-written model that a later start would load. ``last-used`` is touched by every process
that opens the entry; ``prune`` reads it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ember.embedder.files import ModelFiles
from ember.embedder.spec import ModelSpec

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

Weights = Literal["float32", "int8"]

#: Bump whenever graph.py (or quantize.py) changes what it builds.
GRAPH_VERSION = "1"
MODEL_FILE = "model.onnx"
DATA_FILE = "model.onnx.data"
LAST_USED = "last-used"
STAGING_PREFIX = ".build-"
TRASH_PREFIX = ".trash-"
#: Writes the files of an entry into the directory it is given.
WriteEntry = Callable[[Path], None]
_ENTRY = re.compile(r"(?P<model>[A-Za-z0-9._-]+)-(?P<key>[0-9a-f]{32})")


def user_models_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The per-user cache: ``$XDG_CACHE_HOME/ember/models`` (an absolute one, as the XDG spec
    requires), ``%LOCALAPPDATA%\\ember\\models`` on Windows, else ``~/.cache/ember/models``."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        base = Path(xdg)
    elif sys.platform == "win32" and environ.get("LOCALAPPDATA"):
        base = Path(environ["LOCALAPPDATA"])
    else:
        base = Path("~/.cache").expanduser()
    return base / "ember" / "models"


@dataclass(frozen=True)
class GraphKind:
    """Which graph is built from a checkpoint: ``fused_attention`` (onnxruntime's ``Attention``
    operator, else standard operators) and ``weights`` (``int8``: the dense layers' weights in
    8-bit blocks, ``quantize.py``; ``float32``: as trained). No defaults: what ships is
    ``runtime.Tuning``'s, the one place that chooses."""

    fused_attention: bool
    weights: Weights


def cache_key(files: ModelFiles, kind: GraphKind) -> str:
    """Digest of what the graph is built from (about 0.1 s for 90 MB of weights). The float32
    fused graph keeps the key it had before 8-bit weights existed, so its cache entry stays."""
    variant = f"{kind.fused_attention}" + ("" if kind.weights == "float32" else f"-{kind.weights}")
    digest = hashlib.sha256(f"ember-graph-{GRAPH_VERSION}-{variant}\0".encode())
    for path in (files.config, files.weights):
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def entry_name(model: str, key: str) -> str:
    """``all-MiniLM-L6-v2-<key>``; characters a file name cannot safely hold become ``_``."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', model)[:64].lstrip('.') or 'model'}-{key}"


def entry_model(name: str) -> str | None:
    """The model part of an entry's name; ``None`` for anything that is not an entry."""
    match = _ENTRY.fullmatch(name)
    return match["model"] if match and not name.startswith(".") else None


def is_complete(entry: Path) -> bool:
    """Both files present. Entries only ever appear by rename of a finished build, so
    presence is completeness; a ``.build-*`` directory is never looked up."""
    return (entry / MODEL_FILE).is_file() and (entry / DATA_FILE).is_file()


def build_model(files: ModelFiles, spec: ModelSpec, kind: GraphKind) -> onnx.ModelProto:
    """Build the graph in memory. ``graph`` (and with it ``onnx``) is imported only here, so a
    start-up that finds its graph on disk never pays for that import."""
    from ember.embedder.checkpoint import read_weights
    from ember.embedder.graph import build_graph

    model = build_graph(spec, read_weights(files.weights), kind.fused_attention)
    if kind.weights == "int8":
        from ember.embedder.quantize import int8_weights

        model = int8_weights(model)
    return model


def compiled_model(
    files: ModelFiles,
    spec: ModelSpec,
    cache_dir: Path,
    kind: GraphKind,
    model: str = "model",
) -> Path:
    """Path of the cached ``model.onnx``, building and publishing the entry first when absent;
    marks the entry used.

    Raises ``OSError`` when ``cache_dir`` cannot be written (the caller builds in memory
    instead) and ``EmbedderUnavailable`` when the weights themselves are unusable.
    """
    target = cache_dir / entry_name(model, cache_key(files, kind))
    if not is_complete(target):
        _publish(target, lambda staging: _write_graph(staging, files, spec, kind))
    touch(target)
    return target / MODEL_FILE


def _write_graph(staging: Path, files: ModelFiles, spec: ModelSpec, kind: GraphKind) -> None:
    import onnx  # only on a miss: see build_model

    onnx.save_model(
        build_model(files, spec, kind),
        str(staging / MODEL_FILE),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=DATA_FILE,
        size_threshold=1024,
    )


def _publish(target: Path, write: WriteEntry) -> None:
    """Write an entry in a staging directory beside ``target``, flush it, rename it into place.

    Two processes publishing the same entry at once: the first rename wins; the second finds
    the (identical) entry complete and drops its own copy.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target.parent))
    try:
        write(staging)
        (staging / LAST_USED).touch()
        for path in staging.iterdir():
            _fsync(path)
        _fsync(staging)
        try:
            staging.rename(target)
        except OSError:
            if not is_complete(target):
                raise
        else:
            _fsync(target.parent)  # the rename itself survives a power cut
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fsync(path: Path) -> None:
    """Flush a file's data (or a directory's entries, where the OS allows it) to disk: without
    it a power cut after the rename can leave an entry whose data file is empty or short."""
    if path.is_dir():
        if sys.platform == "win32":
            return  # directories cannot be opened for fsync on Windows
        fd = os.open(path, os.O_RDONLY)
    else:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def touch(entry: Path) -> None:
    """Record that a process uses ``entry`` now (what ``prune`` reads); a read-only cache
    is used as it is."""
    try:
        (entry / LAST_USED).touch()
    except OSError as exc:
        log.debug("cannot mark %s as used: %s", entry, exc)


def last_used(entry: Path) -> float:
    """When a process last opened (or built) ``entry``: the newest mtime among ``last-used``,
    the entry's files and the directory itself (a build in progress writes its files)."""
    times = [entry.stat().st_mtime]
    for path in entry.iterdir():
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times)


def remove_entry(entry: Path) -> bool:
    """Take ``entry`` away atomically (renamed to ``.trash-*``, then deleted), so no process
    ever finds it half deleted. False if it could not be moved (gone already, or in use on a
    system that forbids that)."""
    trash = entry.with_name(f"{TRASH_PREFIX}{entry.name}-{secrets.token_hex(4)}")
    try:
        entry.rename(trash)
    except OSError as exc:
        log.debug("cannot remove %s: %s", entry, exc)
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


def discard(model_path: Path) -> None:
    """Remove a cache entry that onnxruntime refused, so the next start rebuilds it."""
    remove_entry(model_path.parent)
