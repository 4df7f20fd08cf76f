"""The process-wide cache and the background loader the proxy starts at start-up."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ember.config import load_settings
from ember.embedder import (
    INSTALL_HINT,
    Embedder,
    EmbedderCache,
    EmbedderNotReady,
    EmbedderUnavailable,
    embedder_from,
    get_embedder,
    load_embedder,
    models_dir,
    preload,
    preload_from,
)
from ember.embedder import factory as factory_module
from ember.embedder import files as files_module
from ember.embedder.compiled import user_models_dir
from ember.embedder.files import Backend


class StubEmbedder:
    """A stand-in model for cache tests, which are about who loads what, not about vectors."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dim = 2

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(texts), 1))


class GatedLoader:
    """Counts loads; each load blocks until ``gate`` is set, like a slow model read."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.gate = threading.Event()
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    def __call__(self, backend: Backend, model: str, cache_dir: Path | None) -> Embedder:
        self.calls.append((backend, model))
        assert self.gate.wait(30), "test never opened the gate"
        if self.fail is not None:
            raise self.fail
        return StubEmbedder(f"{backend}:{model}")


def test_get_embedder_is_one_object_per_backend_and_model(minilm: Embedder) -> None:
    assert get_embedder() is minilm
    assert get_embedder("onnx", "sentence-transformers/all-MiniLM-L6-v2") is minilm
    assert preload().get() is minilm


def test_preload_returns_before_the_model_is_loaded() -> None:
    load = GatedLoader()
    cache = EmbedderCache(load)
    loader = cache.preload("onnx", "m")  # returns although the load is blocked on the gate
    assert not loader.ready() and not loader.done() and loader.error is None
    with pytest.raises(EmbedderNotReady, match="still loading"):
        loader.get(timeout=0.01)
    load.gate.set()
    model = loader.get(timeout=30)
    assert loader.ready() and model.name == "onnx:m"
    assert cache.get("onnx", "m") is model


def test_concurrent_first_callers_share_one_load() -> None:
    load = GatedLoader()
    cache = EmbedderCache(load)
    results: list[Embedder] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("onnx", "m"))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    load.gate.set()
    for t in threads:
        t.join(30)
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert load.calls == [("onnx", "m")]


def test_backends_are_cached_separately() -> None:
    load = GatedLoader()
    load.gate.set()
    cache = EmbedderCache(load)
    assert cache.get("onnx", "m") is not cache.get("hub", "m")
    assert sorted(load.calls) == [("hub", "m"), ("onnx", "m")]


def test_a_failed_load_is_reported_and_not_retried_at_once() -> None:
    load = GatedLoader(fail=EmbedderUnavailable("no weights"))
    load.gate.set()
    cache = EmbedderCache(load, retry_after=3600)
    loader = cache.preload("onnx", "m")
    with pytest.raises(EmbedderUnavailable, match="no weights"):
        loader.get(timeout=30)
    assert not loader.ready() and loader.done()
    assert isinstance(loader.error, EmbedderUnavailable)
    assert cache.preload("onnx", "m") is loader
    assert len(load.calls) == 1


def test_a_failed_load_is_retried_after_the_cool_down() -> None:
    load = GatedLoader(fail=EmbedderUnavailable("no weights"))
    load.gate.set()
    cache = EmbedderCache(load, retry_after=0)
    first = cache.preload("onnx", "m")
    with pytest.raises(EmbedderUnavailable):
        first.get(timeout=30)
    load.fail = None
    assert cache.get("onnx", "m", timeout=30).name == "onnx:m"
    assert len(load.calls) == 2


def test_a_library_crash_becomes_embedder_unavailable() -> None:
    load = GatedLoader(fail=RuntimeError("onnxruntime exploded"))
    load.gate.set()
    loader = EmbedderCache(load).preload("onnx", "m")
    with pytest.raises(EmbedderUnavailable, match="onnxruntime exploded") as err:
        loader.get(timeout=30)
    assert isinstance(err.value.__cause__, RuntimeError)


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(EmbedderUnavailable, match="use one of onnx, hub"):
        EmbedderCache(GatedLoader()).preload("torch", "m")  # type: ignore[arg-type]


def test_missing_weights_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """No package and no network: the message a user sees names the command that fixes it."""

    def offline(repo: str, filename: str) -> str:
        raise OSError("Network is unreachable")

    monkeypatch.setattr(files_module, "find_package_files", lambda model: None)
    monkeypatch.setattr(
        factory_module,
        "locate",
        lambda backend, model: files_module.locate(
            backend, model, download=offline, find_package=files_module.find_package_files
        ),
    )
    loader = EmbedderCache(load_embedder).preload("onnx", "all-MiniLM-L6-v2")
    with pytest.raises(EmbedderUnavailable) as err:
        loader.get(timeout=30)
    assert INSTALL_HINT in str(err.value)
    assert "Network is unreachable" in str(err.value)
    assert loader.error is err.value


def test_settings_choose_the_process_wide_embedder(tmp_path: Path, minilm: Embedder) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    assert models_dir(settings) == user_models_dir()  # per user, not per EMBER_HOME
    assert preload_from(settings).get(timeout=60) is minilm
    assert embedder_from(settings) is minilm


def test_importing_the_package_does_not_load_onnxruntime() -> None:
    """The proxy imports memory code at start-up; the ~0.7 s of model libraries must be paid in
    the background loader, not before the proxy can answer."""
    code = (
        "import sys, ember.embedder; "
        "print(sorted(m for m in ('onnxruntime', 'onnx', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
