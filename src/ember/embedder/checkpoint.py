"""Read a checkpoint's files: its JSON configs into a ``ModelSpec``, its safetensors into numpy.

Every lower-layer failure is mapped onto ``EmbedderUnavailable`` naming the file, so a corrupt
download reads as "re-install the weights", not as a safetensors or JSON stack trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file

from ember.embedder.errors import EmbedderUnavailable
from ember.embedder.files import ModelFiles
from ember.embedder.spec import ModelSpec, parse_spec


def _read_json(path: Path | None) -> Any:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbedderUnavailable(f"cannot read {path}: {exc}") from exc


def read_spec(files: ModelFiles) -> ModelSpec:
    return parse_spec(
        _read_json(files.config), _read_json(files.sbert_config), _read_json(files.pooling)
    )


def read_weights(path: Path) -> Mapping[str, npt.NDArray[np.float32]]:
    """The safetensors tensors by BERT name; a ``bert.`` prefix (``BertForX`` exports) is cut."""
    try:
        raw = load_file(str(path))
    except Exception as exc:  # safetensors raises its own, OSError, or ValueError
        raise EmbedderUnavailable(
            f"cannot read weights {path}: {exc}. Re-install the model files."
        ) from exc
    return {k.removeprefix("bert."): v for k, v in raw.items()}
