"""The ONNX embedder gives the reference model's vectors (sentence-transformers on torch).

The fixture was written once by scripts/make_minilm_reference.py with the real reference
implementation; a vector that drifts (wrong pooling, tanh GELU, truncation at 128, a missed
token-type row) shows up here as a cosine below 0.9999 for some sentence.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from ember.embedder import Embedder, ModelFiles
from ember.embedder.runtime import Tuning, load_onnx_embedder

MIN_COSINE = 0.9999
#: The shipped graph's 8-bit weights (``ember.embedder.quantize``) move a vector by at most this
#: much: the worst of the fixture's sentences (a 256-piece truncated one) sits at 0.998. A wrong
#: scale or zero point in the quantisation lands far below (0.5-0.9).
INT8_MIN_COSINE = 0.997


def _cosines(model: Embedder, reference: dict[str, Any], one_by_one: bool) -> list[float]:
    texts = [row["text"] for row in reference["sentences"]]
    expected = np.array([row["vector"] for row in reference["sentences"]], dtype=np.float64)
    if one_by_one:
        got = np.vstack([model.embed([t]) for t in texts]).astype(np.float64)
    else:
        got = model.embed(texts).astype(np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)  # undo the fixture's rounding
    return [float(c) for c in (got * expected).sum(axis=1)]


def test_fixture_matches_the_installed_weights(
    package_files: ModelFiles, reference: dict[str, Any]
) -> None:
    digest = hashlib.sha256(package_files.weights.read_bytes()).hexdigest()
    assert digest == reference["weights_sha256"], "the installed weights are not the fixture's"


def test_fixture_covers_the_cases_that_break_embedders(reference: dict[str, Any]) -> None:
    rows = reference["sentences"]
    assert len(rows) >= 20
    assert any(row["text"] == "" for row in rows)
    assert sum(row["tokens_untruncated"] > reference["max_seq_length"] for row in rows) >= 2
    assert any(any(ord(ch) > 0x3000 for ch in row["text"]) for row in rows)  # CJK


def _worst(model: Embedder, reference: dict[str, Any], one_by_one: bool) -> tuple[float, str]:
    cosines = _cosines(model, reference, one_by_one)
    worst = min(range(len(cosines)), key=cosines.__getitem__)
    return cosines[worst], reference["sentences"][worst]["text"][:60]


@pytest.mark.parametrize("one_by_one", [False, True], ids=["batched", "one_by_one"])
def test_the_float32_graph_matches_the_reference(
    package_files: ModelFiles, reference: dict[str, Any], one_by_one: bool
) -> None:
    exact = load_onnx_embedder(package_files, "exact", Tuning(weights="float32"))
    cosine, text = _worst(exact, reference, one_by_one)
    assert cosine >= MIN_COSINE, f"{text!r}: cosine {cosine:.6f}"


@pytest.mark.parametrize("one_by_one", [False, True], ids=["batched", "one_by_one"])
def test_the_shipped_int8_graph_stays_next_to_the_reference(
    minilm: Embedder, reference: dict[str, Any], one_by_one: bool
) -> None:
    cosine, text = _worst(minilm, reference, one_by_one)
    assert cosine >= INT8_MIN_COSINE, f"{text!r}: cosine {cosine:.6f}"


def test_the_shipped_graph_gives_a_text_the_same_bytes_alone_and_in_a_batch(
    minilm: Embedder, reference: dict[str, Any]
) -> None:
    """A fact stored in a batch and the same words asked alone must meet at cosine 1: with
    8-bit weights a row moves with its batch-mates, so the embedder runs texts one by one."""
    texts = [row["text"] for row in reference["sentences"]]
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert minilm.embed(texts).tobytes() == alone.tobytes()


def test_the_unfused_graph_matches_the_reference_too(
    package_files: ModelFiles, reference: dict[str, Any]
) -> None:
    """``Tuning(fused_attention=False, weights="float32")`` is the portable graph (standard
    operators only)."""
    plain = load_onnx_embedder(
        package_files, "plain", Tuning(fused_attention=False, weights="float32")
    )
    assert min(_cosines(plain, reference, one_by_one=False)) >= MIN_COSINE


def test_model_identity(minilm: Embedder, reference: dict[str, Any]) -> None:
    assert minilm.name == "onnx:all-MiniLM-L6-v2"
    assert minilm.dim == len(reference["sentences"][0]["vector"]) == 384
