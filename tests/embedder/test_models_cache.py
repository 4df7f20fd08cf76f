"""The per-user models cache: one entry shared by every EMBER_HOME, written atomically.

These use ``tiny_graph`` (a 4 KB stand-in for the 87 MB graph): what is tested is how entries
are written, found and shared, not the model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ember.config import load_settings
from ember.embedder import (
    EmbedderCache,
    EmbedderUnavailable,
    ModelFiles,
    models_dir,
    preload_from,
)
from ember.embedder import factory as factory_module
from ember.embedder.compiled import (
    DATA_FILE,
    LAST_USED,
    MODEL_FILE,
    STAGING_PREFIX,
    GraphKind,
    cache_key,
    compiled_model,
    entry_model,
    entry_name,
    is_complete,
    user_models_dir,
)
from ember.embedder.prune import LEFTOVER_AFTER, prune

from .conftest import TinyGraph

FULL_DATA = 4096  # the tiny graph's one initializer, as external data


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if entry_model(p.name))


def _build(files: ModelFiles, cache: Path) -> Path:
    return compiled_model(files, None, cache, GraphKind(True, "int8"), "tiny")  # type: ignore[arg-type]


def test_a_build_killed_mid_write_leaves_no_entry_a_later_start_would_load(
    tmp_path: Path, tiny_files: ModelFiles, tiny_graph: TinyGraph
) -> None:
    """The process dies (no ``finally``, no cleanup) with the weights half written: the next
    start must not find an entry, and must build a whole one."""
    cache = tmp_path / "models"
    dies_mid_write = f"""
import os
from pathlib import Path
import onnx
from ember.embedder import compiled
from ember.embedder.files import ModelFiles

def save_half_then_die(model, path, **kwargs):
    Path(path).write_bytes(b"graph")
    with open(Path(path).parent / compiled.DATA_FILE, "wb") as fh:
        fh.write(bytes(1000))
        fh.flush()
        os._exit(9)

onnx.save_model = save_half_then_die
compiled.build_model = lambda *args: None
files = ModelFiles("test", Path({str(tiny_files.config)!r}), Path({str(tiny_files.config)!r}),
                   Path({str(tiny_files.weights)!r}))
compiled.compiled_model(files, None, Path({str(cache)!r}), compiled.GraphKind(True, "int8"), "tiny")
"""
    died = subprocess.run([sys.executable, "-c", dies_mid_write], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    (leftover,) = cache.iterdir()
    assert leftover.name.startswith(STAGING_PREFIX) and _entries(cache) == []

    path = _build(tiny_files, cache)
    assert tiny_graph.calls == 1  # rebuilt, not taken from the dead process's files
    assert (path.parent / DATA_FILE).stat().st_size == FULL_DATA
    assert _entries(cache) == [path.parent.name]
    # The dead build is tidied once it is clearly abandoned (never while it could be running).
    assert prune(cache, keep=path.parent.name) == []
    now = (leftover / DATA_FILE).stat().st_mtime + LEFTOVER_AFTER + 1
    assert prune(cache, keep=path.parent.name, now=now) == [leftover.name]


def test_a_build_that_fails_mid_write_leaves_nothing_behind(
    tmp_path: Path,
    tiny_files: ModelFiles,
    tiny_graph: TinyGraph,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import onnx

    def disk_full(model: object, path: str, **kwargs: object) -> None:
        Path(path).write_bytes(b"graph")
        (Path(path).parent / DATA_FILE).write_bytes(bytes(1000))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx, "save_model", disk_full)
    cache = tmp_path / "models"
    with pytest.raises(OSError, match="No space left"):
        _build(tiny_files, cache)
    assert list(cache.iterdir()) == []


def test_two_builders_at_once_end_with_one_good_entry(
    tmp_path: Path, tiny_files: ModelFiles, tiny_graph: TinyGraph
) -> None:
    """Both miss the cache and build at the same moment (held together by a barrier): one
    rename wins, the other uses the winner's entry; no staging directory is left."""
    cache = tmp_path / "models"
    tiny_graph.gate = threading.Barrier(2)
    paths: list[Path] = []
    threads = [
        threading.Thread(target=lambda: paths.append(_build(tiny_files, cache))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert tiny_graph.calls == 2 and len(paths) == 2 and paths[0] == paths[1]
    assert [p.name for p in cache.iterdir()] == [paths[0].parent.name]
    assert is_complete(paths[0].parent)
    assert (paths[0].parent / DATA_FILE).stat().st_size == FULL_DATA


def test_every_ember_home_shares_one_entry_instead_of_a_copy_each(
    tmp_path: Path,
    tiny_files: ModelFiles,
    tiny_graph: TinyGraph,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    dirs = {models_dir(load_settings(env={"EMBER_HOME": str(h)})) for h in homes}
    assert dirs == {tmp_path / "xdg" / "ember" / "models"}
    (shared,) = dirs

    paths = {_build(tiny_files, shared) for _ in homes}
    assert tiny_graph.calls == 1 and len(paths) == 1
    assert not any(h.exists() and any(h.rglob(MODEL_FILE)) for h in homes)

    # ... and it is that directory the proxy's background load is given, from either home.
    seen: list[Path | None] = []

    def load(backend: object, model: object, cache_dir: Path | None) -> object:
        seen.append(cache_dir)
        raise EmbedderUnavailable("only the directory matters here")

    monkeypatch.setattr(factory_module, "DEFAULT", EmbedderCache(load, retry_after=0))  # type: ignore[arg-type]
    for home in homes:
        with pytest.raises(EmbedderUnavailable):
            preload_from(load_settings(env={"EMBER_HOME": str(home)})).get(timeout=30)
    assert seen == [shared, shared]


def test_models_dir_setting_overrides_the_user_cache(tmp_path: Path) -> None:
    settings = load_settings(
        env={"EMBER_HOME": str(tmp_path), "EMBER_MODELS_DIR": str(tmp_path / "m")}
    )
    assert models_dir(settings) == tmp_path / "m"
    home = Path("~").expanduser()
    assert models_dir(load_settings(env={}, models_dir="~/graphs")) == home / "graphs"


def test_user_cache_follows_xdg_and_ignores_a_relative_one() -> None:
    assert user_models_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/ember/models")
    fallback = Path("~/.cache/ember/models").expanduser()
    if sys.platform != "win32":
        assert user_models_dir({"XDG_CACHE_HOME": "relative/dir"}) == fallback
        assert user_models_dir({}) == fallback


def test_an_entry_is_named_after_its_model_and_key(tiny_files: ModelFiles) -> None:
    key = cache_key(tiny_files, GraphKind(True, "int8"))
    name = entry_name("BAAI/bge-small-en-v1.5", key)
    assert name == f"BAAI_bge-small-en-v1.5-{key}"
    assert entry_model(name) == "BAAI_bge-small-en-v1.5"
    assert entry_model(".build-x1y2") is None and entry_model(key) is None


def test_opening_an_entry_marks_it_used(
    tmp_path: Path, tiny_files: ModelFiles, tiny_graph: TinyGraph
) -> None:
    entry = _build(tiny_files, tmp_path).parent
    os.utime(entry / LAST_USED, (1_000_000, 1_000_000))
    _build(tiny_files, tmp_path)
    assert (entry / LAST_USED).stat().st_mtime > 1_000_000
    assert tiny_graph.calls == 1
