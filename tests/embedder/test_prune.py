"""Pruning the models cache: the entry in use and anything possibly being read stay; stale go."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from ember.embedder import ModelFiles
from ember.embedder.compiled import DATA_FILE, LAST_USED, MODEL_FILE, entry_name
from ember.embedder.prune import DAY, prune
from ember.embedder.runtime import Tuning, _open_session

from .conftest import TinyGraph

NOW = 2_000_000_000.0
HOUR = 3600.0


def _entry(cache: Path, name: str, idle: float) -> Path:
    """A complete entry last opened ``idle`` seconds before ``NOW``."""
    entry = cache / name
    entry.mkdir(parents=True)
    for file in (MODEL_FILE, DATA_FILE, LAST_USED):
        (entry / file).write_bytes(b"x")
        os.utime(entry / file, (NOW - idle, NOW - idle))
    os.utime(entry, (NOW - idle, NOW - idle))
    return entry


def _key(n: int) -> str:
    return f"{n:032x}"


def test_pruning_keeps_the_entry_in_use_and_removes_stale_ones(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    current = entry_name("all-MiniLM-L6-v2", _key(1))
    _entry(cache, current, idle=400 * DAY)  # in use: never removed, however old its stamp
    older_graph = _entry(cache, entry_name("all-MiniLM-L6-v2", _key(2)), idle=2 * DAY)
    # Same model, other key, opened an hour ago: another process (an older ember) may be
    # starting from it right now.
    recent_other = _entry(cache, entry_name("all-MiniLM-L6-v2", _key(3)), idle=HOUR)
    other_model_stale = _entry(cache, entry_name("bge-small", _key(4)), idle=31 * DAY)
    other_model_used = _entry(cache, entry_name("bge-small", _key(5)), idle=5 * DAY)
    dead_build = _entry(cache, ".build-dead1234", idle=2 * HOUR)
    live_build = _entry(cache, ".build-live5678", idle=60)  # another process is writing it
    not_ours = _entry(cache, "notes", idle=400 * DAY)

    removed = prune(cache, keep=current, now=NOW)

    assert sorted(removed) == sorted([older_graph.name, other_model_stale.name, dead_build.name])
    left = sorted(p.name for p in cache.iterdir())
    assert left == sorted(
        [current, recent_other.name, other_model_used.name, live_build.name, not_ours.name]
    )


def test_pruning_a_missing_or_unreadable_cache_never_fails_the_load(tmp_path: Path) -> None:
    assert prune(tmp_path / "absent", keep=entry_name("m", _key(1)), now=NOW) == []


def test_opening_the_graph_prunes_superseded_entries_of_the_same_model(
    tmp_path: Path,
    tiny_files: ModelFiles,
    tiny_graph: TinyGraph,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Wired into the load: after its session is open, a process tidies the cache."""
    cache = tmp_path / "models"
    old = _entry(cache, entry_name("tiny", _key(7)), idle=0)
    two_days_ago = time.time() - 2 * DAY
    for path in (*old.iterdir(), old):
        os.utime(path, (two_days_ago, two_days_ago))
    with caplog.at_level(logging.INFO):
        _open_session(tiny_files, None, Tuning(), "onnx:tiny", cache)  # type: ignore[arg-type]
    (entry,) = cache.iterdir()
    assert entry.name.startswith("tiny-") and entry.name != old.name
    assert "removed 1 unused embedder graph" in caplog.text
