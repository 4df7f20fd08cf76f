"""The files output shaping keeps under ``$EMBER_HOME/shaping/`` (the only I/O of the package
besides the recorder that uses these helpers).

- ``verbosity.json``: ``{"level": int, "baseline": {stratum: [n, mean, m2]}, ...}``. The learned
  level and the unshaped baseline. Written by ``ember learn --verbosity`` and by the recorder
  (it adds what unshaped traffic produced while shaping was off); every writer re-reads it
  under the lock and keeps keys it does not own.
- ``output_savings.json``: the savings ledger (``savings.Ledger``), shared by every proxy.
- ``controller.json``: the AIMD controller's state (``controller.ControllerState``).
- ``.lock``: an advisory lock held while any of them is read-modified-written, so proxies
  sharing ``$EMBER_HOME`` never lose each other's updates.

Savings hold token counts only (no prompts, no answers, no project names), so one file for
all projects leaks nothing across projects.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.fsutil import write_json
from ember.shaping.controller import ControllerState

__all__ = [
    "ShapingFiles",
    "learned_level",
    "load_controller",
    "read_json",
    "save_controller",
    "set_aside",
    "write_json",
]

log = logging.getLogger(__name__)

try:  # POSIX advisory locks; elsewhere a single proxy per home is assumed
    import fcntl
except ImportError:  # pragma: no cover - windows
    fcntl = None  # type: ignore[assignment]


@dataclass(frozen=True)
class ShapingFiles:
    home: Path

    @property
    def directory(self) -> Path:
        return self.home / "shaping"

    @property
    def verbosity(self) -> Path:
        return self.directory / "verbosity.json"

    @property
    def ledger(self) -> Path:
        return self.directory / "output_savings.json"

    @property
    def controller(self) -> Path:
        return self.directory / "controller.json"

    @property
    def lock_path(self) -> Path:
        return self.directory / ".lock"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the shaping lock (blocking) for a read-modify-write."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_json(path: Path) -> Any:
    """The parsed content of ``path``; None when it does not exist.

    Raises ``ValueError`` when it exists but is not JSON, so callers decide between keeping
    the file aside (``set_aside``) and ignoring it -- never silently overwriting it.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def set_aside(path: Path, reason: str) -> Path:
    """Move an unreadable file out of the way (kept for inspection) and say so."""
    target = path.with_name(f"{path.name}.bad-{int(time.time())}")
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, target)
    log.warning("%s was unreadable (%s); kept as %s and started afresh", path, reason, target)
    return target


def learned_level(data: Any) -> int | None:
    """The ``level`` of a ``verbosity.json`` content, when it is an int."""
    level = data.get("level") if isinstance(data, dict) else None
    return level if isinstance(level, int) and not isinstance(level, bool) else None


def load_controller(files: ShapingFiles) -> ControllerState | None:
    """The saved controller state; None when absent or unreadable (logged, file kept)."""
    try:
        return ControllerState.from_json(read_json(files.controller))
    except ValueError as exc:
        log.warning("ignoring the controller state: %s", exc)
        return None


def save_controller(files: ShapingFiles, state: ControllerState) -> None:
    """Write the controller state (last writer wins: it is one user's preference, and the
    next observation corrects a lost update)."""
    write_json(files.controller, state.to_json())
