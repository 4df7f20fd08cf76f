"""8-bit weights: what the rewrite keeps, what it drops, and how close its products stay."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort  # type: ignore[import-untyped]
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.embedder.quantize import ZERO_POINT, int8_weights, quantize_blocks

RNG = np.random.default_rng(7)


def _two_matmuls(k: int, n: int) -> onnx.ModelProto:
    """x [rows, k] @ w1 [k, n], then @ w2 [n, 3]: two constant weights (the second one's K=n)."""
    w1 = numpy_helper.from_array(RNG.normal(size=(k, n)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(RNG.normal(size=(n, 3)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 3])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def test_blocks_hold_each_weight_within_half_a_step_of_its_scale() -> None:
    w = RNG.normal(size=(256, 5)).astype(np.float32)
    values, scale = quantize_blocks(w, 128)
    assert values.shape == (5, 2, 128) and scale.shape == (5, 2)
    back = (values.astype(np.float32) - ZERO_POINT) * scale[..., None]
    err = np.abs(back.reshape(5, 256).T - w)
    assert float(err.max()) <= float(scale.max()) / 2 + 1e-6
    # The largest weight of every block lands on +-127: the whole 8-bit range is used.
    assert set(np.abs(values.astype(int) - ZERO_POINT).max(axis=2).ravel()) == {127}


def test_a_weight_not_cut_into_whole_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="blocks of 128"):
        quantize_blocks(np.ones((100, 4), np.float32), 128)


def test_the_rewrite_replaces_whole_block_weights_and_keeps_the_rest_float() -> None:
    model = _two_matmuls(k=256, n=128)
    out = int8_weights(model, block=128)
    ops = [node.op_type for node in out.graph.node]
    # w1 (K=256) and w2 (K=128) both cut into blocks; the float copies are gone.
    assert ops == ["MatMulNBits", "MatMulNBits"]
    assert {t.name for t in out.graph.initializer} == {"w1.q8", "w1.scale", "w2.q8", "w2.scale"}
    assert [n.op_type for n in model.graph.node] == ["MatMul", "MatMul"]  # the input is untouched
    partial = int8_weights(_two_matmuls(k=256, n=96), block=128)  # w2's K=96: stays float32
    assert [node.op_type for node in partial.graph.node] == ["MatMulNBits", "MatMul"]
    assert "w2" in {t.name for t in partial.graph.initializer}


def test_the_8_bit_graph_computes_what_the_float_one_does_to_within_a_few_percent() -> None:
    """Random weights and inputs through two layers: ~1% off (8-bit weights, and activations
    quantised per block for int8 arithmetic). A wrong scale or zero point is 50-100% off."""
    model = _two_matmuls(k=256, n=128)
    x = RNG.normal(size=(7, 256)).astype(np.float32)
    exact, approx = _run(model, x), _run(int8_weights(model), x)
    assert approx.shape == exact.shape
    rel = np.linalg.norm(approx - exact) / np.linalg.norm(exact)
    assert rel < 0.03, rel
