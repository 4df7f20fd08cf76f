"""Broken model files fail with EmbedderUnavailable naming the file, never a library traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ember.embedder import EmbedderUnavailable, ModelFiles
from ember.embedder.runtime import load_onnx_embedder


def _copy(package_files: ModelFiles, dest: Path) -> ModelFiles:
    """The package's small files copied to ``dest``; weights left to each test."""
    dest.mkdir(parents=True, exist_ok=True)
    for src in (package_files.config, package_files.tokenizer):
        shutil.copyfile(src, dest / src.name)
    return ModelFiles(
        source="test copy",
        config=dest / "config.json",
        tokenizer=dest / "tokenizer.json",
        weights=dest / "model.safetensors",
        sbert_config=package_files.sbert_config,
        pooling=package_files.pooling,
    )


def test_corrupt_weights(tmp_path: Path, package_files: ModelFiles) -> None:
    files = _copy(package_files, tmp_path)
    files.weights.write_bytes(b"\x00" * 64)
    with pytest.raises(EmbedderUnavailable, match=r"cannot read weights .*model\.safetensors"):
        load_onnx_embedder(files, name="t")


def test_weights_of_a_different_architecture(tmp_path: Path, package_files: ModelFiles) -> None:
    files = _copy(package_files, tmp_path)
    save_file({"decoder.weight": np.zeros((4, 4), dtype=np.float32)}, str(files.weights))
    with pytest.raises(EmbedderUnavailable, match=r"embeddings\.word_embeddings\.weight"):
        load_onnx_embedder(files, name="t")


def test_tokenizer_from_a_bigger_model(tmp_path: Path, package_files: ModelFiles) -> None:
    files = _copy(package_files, tmp_path)
    config = json.loads(files.config.read_text(encoding="utf-8"))
    files.config.write_text(json.dumps({**config, "vocab_size": 1000}), encoding="utf-8")
    with pytest.raises(EmbedderUnavailable, match="different models"):
        load_onnx_embedder(files, name="t")


def test_unreadable_config(tmp_path: Path, package_files: ModelFiles) -> None:
    files = _copy(package_files, tmp_path)
    files.config.write_text("{not json", encoding="utf-8")
    with pytest.raises(EmbedderUnavailable, match=r"cannot read .*config\.json"):
        load_onnx_embedder(files, name="t")
