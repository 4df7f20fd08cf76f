"""The real graph cached on disk: reused, equivalent, and never a reason to fail."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from ember.embedder import Embedder, ModelFiles
from ember.embedder import compiled as compiled_module
from ember.embedder.compiled import DATA_FILE, MODEL_FILE, GraphKind, cache_key, entry_name
from ember.embedder.runtime import Tuning, load_onnx_embedder

TEXTS = ["the cached graph is the same model", "", "数据库连接池"]
NAME = "onnx:all-MiniLM-L6-v2"
SHIPPED = Tuning().graph


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.iterdir()) if cache_dir.exists() else []


def test_first_load_writes_the_graph_and_vectors_are_unchanged(
    tmp_path: Path, package_files: ModelFiles, minilm: Embedder
) -> None:
    cached = load_onnx_embedder(package_files, NAME, cache_dir=tmp_path)
    (entry,) = _entries(tmp_path)  # one entry, no staging directory left behind
    assert entry.name == entry_name("all-MiniLM-L6-v2", cache_key(package_files, SHIPPED))
    # The real weights (the 8-bit dense layers beside the float32 word table), not a stub.
    assert (entry / MODEL_FILE).is_file() and (entry / DATA_FILE).stat().st_size > 50e6
    assert cached.embed(TEXTS).tobytes() == minilm.embed(TEXTS).tobytes()


def test_second_load_reuses_the_graph_without_rebuilding(
    tmp_path: Path, package_files: ModelFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_onnx_embedder(package_files, NAME, cache_dir=tmp_path)

    def no_build(*args: object) -> None:
        raise AssertionError("the graph was rebuilt although it is cached")

    monkeypatch.setattr(compiled_module, "build_model", no_build)
    second = load_onnx_embedder(package_files, NAME, cache_dir=tmp_path)
    assert second.embed(TEXTS).tobytes() == first.embed(TEXTS).tobytes()


def test_a_corrupt_entry_is_discarded_and_the_model_still_loads(
    tmp_path: Path,
    package_files: ModelFiles,
    minilm: Embedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    load_onnx_embedder(package_files, NAME, cache_dir=tmp_path)
    (entry,) = _entries(tmp_path)
    (entry / MODEL_FILE).write_bytes(b"not a protobuf")
    with caplog.at_level(logging.WARNING):
        again = load_onnx_embedder(package_files, NAME, cache_dir=tmp_path)
    assert again.embed(TEXTS).tobytes() == minilm.embed(TEXTS).tobytes()
    assert "discarding the cached embedder graph" in caplog.text
    assert not entry.exists()  # the next start rebuilds it


def test_an_unwritable_cache_dir_falls_back_to_memory(
    tmp_path: Path, package_files: ModelFiles, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "models"
    blocker.write_text("a file where the cache directory should be", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        loaded = load_onnx_embedder(package_files, NAME, cache_dir=blocker / "sub")
    assert loaded.embed(["still works"]).shape == (1, 384)
    assert "building it in memory" in caplog.text


def test_a_different_checkpoint_gets_a_different_key(
    tmp_path: Path, package_files: ModelFiles
) -> None:
    config = tmp_path / "config.json"
    shutil.copyfile(package_files.config, config)
    with config.open("a", encoding="utf-8") as fh:
        fh.write("\n")
    other = ModelFiles("copy", config, package_files.tokenizer, package_files.weights)
    kinds = [GraphKind(fused, w) for fused in (True, False) for w in ("float32", "int8")]
    assert cache_key(other, SHIPPED) != cache_key(package_files, SHIPPED)
    assert cache_key(package_files, SHIPPED) == cache_key(package_files, SHIPPED)
    assert len({cache_key(package_files, kind) for kind in kinds}) == 4
