"""What memory code relies on from the embedder: shape, unit rows, order, batch independence,
determinism (within and across processes), the window, and clear errors on misuse."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from ember.embedder import Embedder

MEMORIES = [
    "The staging database lives on port 5433, not 5432.",
    "Use ruff format before committing; CI rejects unformatted code.",
    "Alice owns the billing service and reviews its pull requests.",
    "Tests must run offline; mock every HTTP call to the payment provider.",
    "The deploy script needs AWS_PROFILE=prod set in the environment.",
    "短い日本語のメモ",
    "",
    " ".join(["A long design note that goes on and on about caching."] * 30),
]


def test_shape_dtype_and_unit_rows(minilm: Embedder) -> None:
    vectors = minilm.embed(MEMORIES)
    assert vectors.shape == (len(MEMORIES), minilm.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


def test_empty_input_gives_an_empty_matrix(minilm: Embedder) -> None:
    assert minilm.embed([]).shape == (0, minilm.dim)


def test_a_bare_string_is_refused_not_split_into_characters(minilm: Embedder) -> None:
    with pytest.raises(TypeError, match=r"embed\(\[text\]\)"):
        minilm.embed("a query")
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        minilm.embed(["fine", None])  # type: ignore[list-item]


def test_batch_rows_equal_single_embeddings_in_input_order(minilm: Embedder) -> None:
    """Batches are regrouped by length inside; each row must still be its own text's vector."""
    texts = MEMORIES * 9  # 72 texts: several internal batches of mixed lengths
    batched = minilm.embed(texts)
    singles = {t: minilm.embed([t])[0] for t in MEMORIES}
    for row, text in zip(batched, texts, strict=True):
        np.testing.assert_allclose(row, singles[text], atol=2e-6)


def test_concurrent_callers_get_their_own_vectors(minilm: Embedder) -> None:
    """One embedder serves the proxy's request threads and a bulk import at once."""
    expected = {t: minilm.embed([t]).tobytes() for t in MEMORIES}
    results: list[bool] = []

    def worker(offset: int) -> None:
        for i in range(12):
            text = MEMORIES[(offset + i) % len(MEMORIES)]
            results.append(minilm.embed([text]).tobytes() == expected[text])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 48 and all(results)


def test_same_input_gives_identical_bytes(minilm: Embedder) -> None:
    first = minilm.embed(MEMORIES)
    assert minilm.embed(MEMORIES).tobytes() == first.tobytes()


def test_vectors_are_identical_in_a_fresh_process(minilm: Embedder) -> None:
    """Stored memory vectors and tomorrow's query vectors come from different processes."""
    code = (
        "import sys; from ember.embedder import get_embedder; "
        f"sys.stdout.buffer.write(get_embedder().embed({MEMORIES[:3]!r}).tobytes())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=120)
    assert out.stdout == minilm.embed(MEMORIES[:3]).tobytes()


def test_text_past_the_window_is_cut_at_256_word_pieces(minilm: Embedder) -> None:
    head = " ".join(f"fact{i} is about the build" for i in range(80))  # > 256 pieces already
    a, b = minilm.embed([head + " tail one", head + " a completely different tail"])
    assert a.tobytes() == b.tobytes()
    short_a, short_b = minilm.embed(["fact0 tail one", "fact0 a completely different tail"])
    assert not np.allclose(short_a, short_b)


def test_related_memories_rank_above_unrelated_ones(minilm: Embedder) -> None:
    query = minilm.embed(["which port does the staging database use?"])[0]
    scores = minilm.embed(MEMORIES[:5]) @ query
    assert int(np.argmax(scores)) == 0
    assert scores[0] > 0.5 > max(scores[1:])


def test_whitespace_around_a_text_does_not_change_its_vector(minilm: Embedder) -> None:
    a, b = minilm.embed(["deploy on fridays", "  deploy on fridays \n"])
    assert a.tobytes() == b.tobytes()
