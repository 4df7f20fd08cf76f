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

from ember.models import Embedder, ModelFiles
from ember.models.runtime import Tuning, load_onnx_embedder

MIN_COSINE = 0.9999


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


@pytest.mark.parametrize("one_by_one", [False, True], ids=["batched", "one_by_one"])
def test_every_sentence_matches_the_reference(
    minilm: Embedder, reference: dict[str, Any], one_by_one: bool
) -> None:
    cosines = _cosines(minilm, reference, one_by_one)
    worst = min(range(len(cosines)), key=cosines.__getitem__)
    assert cosines[worst] >= MIN_COSINE, (
        f"{reference['sentences'][worst]['text'][:60]!r}: cosine {cosines[worst]:.6f}"
    )


def test_the_unfused_graph_matches_the_reference_too(
    package_files: ModelFiles, reference: dict[str, Any]
) -> None:
    """``Tuning(fused_attention=False)`` is the portable graph (standard operators only)."""
    plain = load_onnx_embedder(package_files, "plain", Tuning(fused_attention=False))
    assert min(_cosines(plain, reference, one_by_one=False)) >= MIN_COSINE


def test_model_identity(minilm: Embedder, reference: dict[str, Any]) -> None:
    assert minilm.name == "onnx:all-MiniLM-L6-v2"
    assert minilm.dim == len(reference["sentences"][0]["vector"]) == 384
