"""The pure parts of bench/piece_vectors.py: how a memory is cut into pieces and how piece
cosines combine, and that the search's cosine sources come back after a variant ran."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

from tests.bench.conftest import bench_module


@pytest.fixture(scope="module")
def pv() -> Iterator[ModuleType]:
    with bench_module("piece_vectors") as module:
        yield module


def test_lines_and_short_lines(pv: ModuleType) -> None:
    text = "this is sadie\ni will talk to you while tyler is at his test\n\n ok "
    assert pv.pieces_of(text, "lines") == [
        "this is sadie",
        "i will talk to you while tyler is at his test",
        "ok",
    ]
    assert pv.pieces_of(text, "lines4") == ["i will talk to you while tyler is at his test"]
    assert pv.pieces_of("one line only", "lines") == []  # the whole text is no extra piece
    assert pv.pieces_of("anything", "whole") == []


def test_chunks_pack_sentences_and_cut_long_ones(pv: ModuleType) -> None:
    assert pv.chunks("a b. c d! e f g\nh", 4) == ["a b. c d!", "e f g h"]
    assert pv.chunks(" ".join(["w"] * 9), 4) == ["w w w w", "w w w w", "w"]
    with pytest.raises(ValueError):
        pv.pieces_of("x", "sentences")


def test_combinations(pv: ModuleType) -> None:
    e = np.eye(4, dtype=np.float32)
    whole = np.stack([e[0], e[1]])
    pieces = [[e[2], 0.6 * e[2] + 0.8 * e[3]], []]
    q = e[2]

    def scores(combine: str) -> list[float]:
        return [round(float(x), 6) for x in pv.PieceScores(whole, pieces, combine)(q)]

    assert scores("max") == [1.0, 0.0]
    assert scores("top2") == [0.8, 0.0]
    assert scores("blend0.5") == [0.5, 0.0]
    assert scores("cand") == [0.0, 0.0]
    assert [round(float(x), 6) for x in pv.PieceScores(whole, pieces, "cand").candidates(q)] == [
        1.0,
        0.0,
    ]


def test_variants_parse(pv: ModuleType) -> None:
    names = [v.name for v in pv.parse_variants("lines:max,chunks24:blend0.5,whole:max")]
    assert names == ["lines max", "chunks24 blend0.5", "whole, exact"]
    with pytest.raises(argparse.ArgumentTypeError, match="combination"):
        pv.parse_variants("lines:mean")


def test_search_sources_restored(pv: ModuleType) -> None:
    from ember.memory import search

    before = (search.vector_side, search.exact_cosines)
    score = pv.PieceScores(np.eye(2, dtype=np.float32), [[], []], "max")
    with pv.piece_search(score, {1: 0, 2: 1}):
        assert search.exact_cosines(None, np.array([1.0, 0.0], np.float32), [1, 2, 3], 2) == {
            1: 1.0,
            2: 0.0,
        }
    assert (search.vector_side, search.exact_cosines) == before
