"""What a sentence-transformers BERT checkpoint is, read from its small JSON config files.

Pure: dictionaries in, a frozen ``ModelSpec`` out. Every value the graph builder and the
tokenizer depend on is read from the checkpoint's own files rather than assumed, because a
silent mismatch does not crash, it only produces slightly wrong vectors. Two such traps:

- ``tokenizer.json`` of all-MiniLM-L6-v2 says "truncate and pad to 128", while the model was
  trained and is used with ``max_seq_length`` 256 (``sentence_bert_config.json``). Honouring the
  tokenizer file would cut long memories in half and change their vectors.
- The pooling must be the one in ``1_Pooling/config.json`` (mean over the attention mask);
  CLS pooling of the same weights gives vectors that look plausible and retrieve badly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ember.embedder.errors import EmbedderUnavailable

#: The ONNX graph's interface: int64 ``[batch, seq]`` inputs, float32 ``[batch, hidden]`` output.
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
OUTPUT = "sentence_embedding"


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a BERT encoder plus the sentence-transformers settings around it."""

    hidden: int
    heads: int
    layers: int
    intermediate: int
    vocab: int
    max_positions: int
    layer_norm_eps: float
    max_seq_length: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _need(cfg: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in cfg:
        raise EmbedderUnavailable(f"{where} has no {key!r}; the model files look incomplete")
    return cfg[key]


def parse_spec(
    config: Mapping[str, Any],
    sbert_config: Mapping[str, Any] | None,
    pooling: Mapping[str, Any] | None,
) -> ModelSpec:
    """Read the checkpoint's configs; refuse anything the ONNX graph does not implement.

    Refusing (``EmbedderUnavailable``) instead of approximating matters: an unsupported
    activation or pooling would still yield unit vectors, just wrong ones, and every memory
    stored with them would have to be re-embedded once someone noticed.
    """
    where = "config.json"
    if config.get("model_type", "bert") != "bert":
        raise EmbedderUnavailable(f"{where}: model_type {config.get('model_type')!r} is not BERT")
    if config.get("hidden_act", "gelu") != "gelu":
        raise EmbedderUnavailable(f"{where}: hidden_act {config.get('hidden_act')!r} unsupported")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise EmbedderUnavailable(f"{where}: only absolute position embeddings are supported")
    hidden = int(_need(config, "hidden_size", where))
    heads = int(_need(config, "num_attention_heads", where))
    if hidden % heads:
        raise EmbedderUnavailable(f"{where}: hidden_size {hidden} not divisible by {heads} heads")
    max_positions = int(config.get("max_position_embeddings", 512))
    _check_pooling(pooling)
    max_seq = int((sbert_config or {}).get("max_seq_length", max_positions))
    return ModelSpec(
        hidden=hidden,
        heads=heads,
        layers=int(_need(config, "num_hidden_layers", where)),
        intermediate=int(_need(config, "intermediate_size", where)),
        vocab=int(_need(config, "vocab_size", where)),
        max_positions=max_positions,
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        max_seq_length=min(max_seq, max_positions),
    )


def _check_pooling(pooling: Mapping[str, Any] | None) -> None:
    if pooling is None:
        return  # sentence-transformers' default for a plain BERT checkpoint is mean pooling
    others = [
        k
        for k, v in pooling.items()
        if k.startswith("pooling_mode_") and v and k != "pooling_mode_mean_tokens"
    ]
    if others or not pooling.get("pooling_mode_mean_tokens", True):
        raise EmbedderUnavailable(
            f"1_Pooling/config.json asks for {others or 'no mean pooling'}; only mean pooling "
            "is implemented"
        )
