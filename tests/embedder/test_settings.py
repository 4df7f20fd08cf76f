"""The embedder's settings: defaults, and a typo that fails at start-up naming the variable."""

from __future__ import annotations

import pytest

from ember.config import load_settings
from ember.errors import ConfigError


def test_defaults_are_the_offline_model(tmp_path: object) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path)})
    assert (settings.embed_backend, settings.embed_model) == ("onnx", "all-MiniLM-L6-v2")


def test_hub_backend_from_the_environment(tmp_path: object) -> None:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_EMBED_BACKEND": "hub"})
    assert settings.embed_backend == "hub"


def test_a_misspelt_backend_names_the_variable(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="EMBER_EMBED_BACKEND") as err:
        load_settings(env={"EMBER_HOME": str(tmp_path), "EMBER_EMBED_BACKEND": "onxx"})
    assert "onnx" in str(err.value) and "hub" in str(err.value)
