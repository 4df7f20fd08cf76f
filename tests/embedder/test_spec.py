"""parse_spec reads the checkpoint's own configs and refuses what the graph cannot reproduce."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ember.embedder import EmbedderUnavailable, ModelFiles
from ember.embedder.checkpoint import read_spec
from ember.embedder.spec import parse_spec

BERT: dict[str, Any] = {
    "model_type": "bert",
    "hidden_act": "gelu",
    "hidden_size": 384,
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "intermediate_size": 1536,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
}


def test_minilm_package_spec(package_files: ModelFiles) -> None:
    spec = read_spec(package_files)
    assert (spec.hidden, spec.heads, spec.head_dim, spec.layers) == (384, 12, 32, 6)
    # tokenizer.json says 128; the model's window is sentence_bert_config's 256.
    tokenizer = json.loads(package_files.tokenizer.read_text(encoding="utf-8"))
    assert tokenizer["truncation"]["max_length"] == 128
    assert spec.max_seq_length == 256


def test_window_never_exceeds_the_position_table() -> None:
    spec = parse_spec(BERT, {"max_seq_length": 4096}, None)
    assert spec.max_seq_length == 512


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "roberta"}, "not BERT"),
        ({"hidden_act": "gelu_new"}, "hidden_act"),
        ({"position_embedding_type": "relative_key"}, "absolute"),
        ({"num_attention_heads": 7}, "divisible"),
    ],
)
def test_unsupported_architectures_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(EmbedderUnavailable, match=message):
        parse_spec({**BERT, **change}, None, None)


def test_missing_key_names_it() -> None:
    config = {k: v for k, v in BERT.items() if k != "num_hidden_layers"}
    with pytest.raises(EmbedderUnavailable, match="num_hidden_layers"):
        parse_spec(config, None, None)


def test_cls_pooling_is_refused() -> None:
    pooling = {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    with pytest.raises(EmbedderUnavailable, match="pooling_mode_cls_token"):
        parse_spec(BERT, None, pooling)
