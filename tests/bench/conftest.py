"""Bench scripts are not a package: their tests import them from ``bench/`` for a module's
lifetime and take the path back afterwards."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).parents[2] / "bench"


@contextmanager
def bench_module(name: str) -> Iterator[ModuleType]:
    """``bench/<name>.py`` imported, with ``bench/`` on the path only while it is in use."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
