"""8-bit weights for the embedder's dense layers: onnxruntime's ``MatMulNBits``.

Why: a short ask (15-20 word pieces) is not compute-bound. Each of the six layers streams
~7 MB of float32 weights through the cache for a handful of rows, and that traffic is most of
the ~5 ms an ask's vector costs on one core (a 4-piece text still takes ~3.5 ms). Weights
stored as 8-bit blocks are a quarter of the bytes.

How: every ``MatMul`` whose right side is a constant ``[K, N]`` matrix becomes a
``com.microsoft.MatMulNBits`` with the same input and output names: each output column is cut
into blocks of ``block`` rows along K, and each block keeps one float scale and 8-bit values
around the default zero point 128 (symmetric: ``round(w / scale)``, ``scale = max|w| / 127``).
``accuracy_level`` 4 lets onnxruntime multiply in int8 with the activations quantised per
block of each row, which is where the speed comes from (the float path dequantises the weights
on every call and is slower than float32). The fused ``Attention`` keeps its float32 QKV
weights: it takes them as an input of its own, not through a ``MatMul``.

What it costs, measured (``bench/embed_throughput.py``, ``bench/memory_quality.py``): vectors
at cosine >= 0.998 from the reference model's (0.9995 at p5 for short texts), recall@10
unchanged on every test split and held-out set (one dev question moved from rank 10 to 11),
and unchanged too for memories stored by the float32 graph and asked with this one. One thing it
changes: a text's vector depends (in the 3rd decimal) on the other rows of its batch, so
``OnnxEmbedder`` embeds such a graph one text at a time (``Tuning.one_at_a_time``); bulk
import keeps its pace that way (~360 short texts/s, float32 in batches of 32: ~340).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"
#: The zero point onnxruntime assumes for 8-bit blocks when none is given.
ZERO_POINT = 128
#: int8 arithmetic with activations quantised per block (onnxruntime's ``accuracy_level``).
INT8_COMPUTE = 4


def quantize_blocks(
    weight: npt.NDArray[np.float32], block: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """``weight`` ``[K, N]`` as ``MatMulNBits`` stores it: uint8 ``[N, K / block, block]`` and
    one scale per (column, block). ``K`` must be a multiple of ``block``."""
    k, n = weight.shape
    if k % block:
        raise ValueError(f"a {k}-row weight cannot be cut into blocks of {block}")
    cols = np.ascontiguousarray(weight.T, dtype=np.float32).reshape(n, k // block, block)
    amax = np.abs(cols).max(axis=2)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    values = np.clip(np.rint(cols / scale[..., None]) + ZERO_POINT, 0, 255).astype(np.uint8)
    return values, scale


def int8_weights(model: onnx.ModelProto, block: int = 128) -> onnx.ModelProto:
    """A copy of ``model`` whose constant-weight ``MatMul`` nodes are 8-bit ``MatMulNBits``
    (see the module doc); the float weights they used are dropped when nothing else uses
    them. Weights whose K is not a multiple of ``block`` stay float32."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        weight = inits.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2 or weight.dims[0] % block:
            nodes.append(node)
            continue
        values, scale = quantize_blocks(numpy_helper.to_array(weight), block)
        q_name, s_name = f"{weight.name}.q8", f"{weight.name}.scale"
        graph.initializer.extend(
            [
                numpy_helper.from_array(values, q_name),
                numpy_helper.from_array(scale.ravel(), s_name),
            ]
        )
        k, n = weight.dims
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], q_name, s_name],
                list(node.output),
                domain=MS_DOMAIN,
                K=k,
                N=n,
                bits=8,
                block_size=block,
                accuracy_level=INT8_COMPUTE,
            )
        )
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == MS_DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return out
