"""Build a sentence-embedding ONNX graph (BERT encoder + mean pooling + L2 norm) from raw weights.

Pure: a ``ModelSpec`` and a mapping of numpy arrays in, an ``onnx.ModelProto`` out; no files,
no torch. The graph reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline to float32
rounding (cosine >= 0.9999999 on the reference fixture):

- embeddings = LayerNorm(word[id] + position[i] + token_type[0]) (single sentences only use
  segment 0, so its row is folded into the position table at build time);
- each layer: self-attention (standard operators, or onnxruntime's fused ``Attention``), exact
  erf GELU, post-LayerNorm residuals, like ``BertLayer``;
- mean over the tokens the attention mask keeps (padding excluded, the count clamped to 1e-9),
  then divide by max(L2 norm, 1e-12), like ``Pooling`` + ``Normalize``.

Padding must not move a vector: padded positions get a large negative bias before the softmax,
so they receive exactly zero attention, and the pooling mask drops them from the mean. That is
what lets a query embedded alone and the same text embedded in a batch of longer ones agree.

Inputs ``input_ids`` and ``attention_mask`` are int64 ``[batch, seq]``; the output
``sentence_embedding`` is float32 ``[batch, hidden]`` with unit rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from ember.embedder.errors import EmbedderUnavailable
from ember.embedder.spec import ATTENTION_MASK, INPUT_IDS, OUTPUT, ModelSpec

#: ONNX opset: 17 is the first with a native LayerNormalization, which onnxruntime runs fused.
OPSET = 17
#: onnxruntime's contrib operators (the fused ``Attention``).
MS_DOMAIN = "com.microsoft"

Weights = Mapping[str, npt.NDArray[np.float32]]


class _Builder:
    """Accumulates nodes and initialisers with unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, value: npt.ArrayLike, dtype: type = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(
        self, x: str, weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32], name: str
    ) -> str:
        """``x @ weight.T + bias`` with torch's ``[out, in]`` weight layout."""
        w = self.const(f"{name}.w", weight.T)
        b = self.const(f"{name}.b", bias)
        return self.op("Add", self.op("MatMul", x, w), b)

    def layer_norm(self, x: str, w: Weights, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.const(f"{prefix}.g", w[f"{prefix}.weight"]),
            self.const(f"{prefix}.b", w[f"{prefix}.bias"]),
            axis=-1,
            epsilon=eps,
        )


def _get(weights: Weights, key: str) -> npt.NDArray[np.float32]:
    if key not in weights:
        raise EmbedderUnavailable(f"model.safetensors has no tensor {key!r}; not a BERT checkpoint")
    return np.asarray(weights[key], dtype=np.float32)


def _embeddings(b: _Builder, w: Weights, spec: ModelSpec) -> str:
    word = b.const("word_embeddings", _get(w, "embeddings.word_embeddings.weight"))
    pos_table = _get(w, "embeddings.position_embeddings.weight")
    type0 = _get(w, "embeddings.token_type_embeddings.weight")[0]
    # (word + type0) + pos in torch; word + (pos + type0) here: a 1-ulp difference at most.
    pos = b.const("position_plus_type0", pos_table + type0)
    seq_len = b.op("Shape", INPUT_IDS, start=1, end=2)
    zero = b.const("zero_i64", [0], np.int64)
    positions = b.op("Slice", pos, zero, seq_len, zero)
    emb = b.op("Add", b.op("Gather", word, INPUT_IDS), positions)
    return b.layer_norm(emb, w, "embeddings.LayerNorm", spec.layer_norm_eps)


def _mask(b: _Builder, fused: bool) -> str:
    """The attention mask in the form the attention nodes take: int32 ``[batch, seq]`` for the
    fused operator, else an additive float bias ``[batch, 1, 1, seq]`` of 0 / float32-min."""
    if fused:
        return b.op("Cast", ATTENTION_MASK, to=TensorProto.INT32)
    mask = b.op("Cast", ATTENTION_MASK, to=TensorProto.FLOAT)
    one = b.const("one", np.float32(1.0))
    neg = b.const("mask_min", np.finfo(np.float32).min)
    bias2d = b.op("Mul", b.op("Sub", one, mask), neg)
    return b.op("Unsqueeze", bias2d, b.const("axes_1_2", [1, 2], np.int64))


def _heads_plain(b: _Builder, qkv: str, bias: str, p: str, spec: ModelSpec) -> str:
    """softmax(Q K^T / sqrt(d) + bias) V in standard ONNX operators."""
    q, k, v = (f"{p}.{n}" for n in "qkv")
    split = b.const(f"{p}.split", [spec.hidden] * 3, np.int64)
    b.nodes.append(helper.make_node("Split", [qkv, split], [q, k, v], axis=2))
    heads = b.const(f"{p}.heads_shape", [0, 0, spec.heads, spec.head_dim], np.int64)
    qh = b.op("Transpose", b.op("Reshape", q, heads), perm=[0, 2, 1, 3])
    kh = b.op("Transpose", b.op("Reshape", k, heads), perm=[0, 2, 3, 1])
    vh = b.op("Transpose", b.op("Reshape", v, heads), perm=[0, 2, 1, 3])
    scale = b.const(f"{p}.scale", np.float32(math.sqrt(spec.head_dim)))
    scores = b.op("Add", b.op("Div", b.op("MatMul", qh, kh), scale), bias)
    ctx = b.op("MatMul", b.op("Softmax", scores, axis=-1), vh)
    flat = b.const(f"{p}.flat_shape", [0, 0, spec.hidden], np.int64)
    return b.op("Reshape", b.op("Transpose", ctx, perm=[0, 2, 1, 3]), flat)


def _attention(
    b: _Builder, x: str, mask: str, w: Weights, p: str, spec: ModelSpec, fused: bool
) -> str:
    """Self-attention, output projection, residual, LayerNorm (``BertAttention``).

    ``fused`` uses onnxruntime's ``com.microsoft.Attention`` operator (QKV projection, scaled
    dot product and mask in one kernel): same vectors to ~1e-7, fewer passes over memory.
    """
    names = ("query", "key", "value")
    qkv_w = np.concatenate([_get(w, f"{p}.attention.self.{n}.weight") for n in names])
    qkv_b = np.concatenate([_get(w, f"{p}.attention.self.{n}.bias") for n in names])
    if fused:
        ctx = b.op(
            "Attention",
            x,
            b.const(f"{p}.qkv.w", qkv_w.T),
            b.const(f"{p}.qkv.b", qkv_b),
            mask,
            domain=MS_DOMAIN,
            num_heads=spec.heads,
        )
    else:
        ctx = _heads_plain(b, b.linear(x, qkv_w, qkv_b, f"{p}.qkv"), mask, p, spec)
    out = b.linear(
        ctx,
        _get(w, f"{p}.attention.output.dense.weight"),
        _get(w, f"{p}.attention.output.dense.bias"),
        f"{p}.attn_out",
    )
    return b.layer_norm(
        b.op("Add", out, x), w, f"{p}.attention.output.LayerNorm", spec.layer_norm_eps
    )


def _feed_forward(b: _Builder, x: str, w: Weights, p: str, spec: ModelSpec) -> str:
    h = b.linear(
        x,
        _get(w, f"{p}.intermediate.dense.weight"),
        _get(w, f"{p}.intermediate.dense.bias"),
        f"{p}.ffn_in",
    )
    # Exact GELU, 0.5 * h * (1 + erf(h / sqrt(2))): the tanh approximation drifts the vectors.
    erf = b.op("Erf", b.op("Div", h, b.const(f"{p}.sqrt2", np.float32(math.sqrt(2.0)))))
    one = b.const(f"{p}.one", np.float32(1.0))
    half = b.const(f"{p}.half", np.float32(0.5))
    gelu = b.op("Mul", b.op("Mul", h, half), b.op("Add", erf, one))
    out = b.linear(
        gelu, _get(w, f"{p}.output.dense.weight"), _get(w, f"{p}.output.dense.bias"), f"{p}.ffn"
    )
    return b.layer_norm(b.op("Add", out, x), w, f"{p}.output.LayerNorm", spec.layer_norm_eps)


def _pool_and_normalize(b: _Builder, x: str) -> str:
    mask = b.op("Cast", ATTENTION_MASK, to=TensorProto.FLOAT)
    mask3 = b.op("Unsqueeze", mask, b.const("axes_2", [2], np.int64))
    axis1 = b.const("axes_1", [1], np.int64)
    summed = b.op("ReduceSum", b.op("Mul", x, mask3), axis1, keepdims=0)
    count = b.op("Max", b.op("ReduceSum", mask3, axis1, keepdims=0), b.const("min_count", 1e-9))
    mean = b.op("Div", summed, count)
    sq = b.op("ReduceSum", b.op("Mul", mean, mean), axis1, keepdims=1)
    norm = b.op("Max", b.op("Sqrt", sq), b.const("min_norm", np.float32(1e-12)))
    b.nodes.append(helper.make_node("Div", [mean, norm], [OUTPUT]))
    return OUTPUT


def build_graph(spec: ModelSpec, weights: Weights, fused_attention: bool = True) -> onnx.ModelProto:
    """The whole embedder as one ONNX model; raises ``EmbedderUnavailable`` on missing tensors."""
    b = _Builder()
    x = _embeddings(b, weights, spec)
    mask = _mask(b, fused_attention)
    for i in range(spec.layers):
        p = f"encoder.layer.{i}"
        x = _attention(b, x, mask, weights, p, spec, fused_attention)
        x = _feed_forward(b, x, weights, p, spec)
    _pool_and_normalize(b, x)
    graph = helper.make_graph(
        b.nodes,
        "sentence_embedder",
        [
            helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", spec.hidden])],
        b.inits,
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ember")
    model.ir_version = 8  # readable by every onnxruntime that supports opset 17
    return model
