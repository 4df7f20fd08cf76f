"""Keeping the per-user models cache from growing without bound (87 MB an entry).

The rule, applied by a process right after it opened its graph from the cache:

- the entry this process uses is never removed, however old its ``last-used``;
- another entry of the same model (an older ``GRAPH_VERSION``, other weights, the other attention
  variant) is removed once no process has opened it for ``SUPERSEDED_AFTER`` (1 day);
- any entry no process has opened for ``UNUSED_AFTER`` (30 days) is removed, whatever its model;
- a ``.build-*`` or ``.trash-*`` directory untouched for ``LEFTOVER_AFTER`` (1 hour) is the
  remains of a process killed while writing or deleting, and is removed;
- anything else in the directory is left alone.

Why time, and why these times: a process reads an entry's files only between touching its
``last-used`` and having its onnxruntime session (a second or two); after that the weights are
mapped, and on POSIX a mapped file survives its deletion. So an entry idle for a day is read by
nobody now, and a process that started from it long ago keeps working if it goes. The one race
left (a process opens an entry in the instant another removes it) ends in that process's
fail-open path: onnxruntime refuses the vanished file and the graph is built in memory for that
run. Removal is atomic (``remove_entry``): nobody sees an entry half deleted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ember.embedder.compiled import (
    STAGING_PREFIX,
    TRASH_PREFIX,
    entry_model,
    last_used,
    remove_entry,
)

log = logging.getLogger(__name__)

DAY = 86400.0
SUPERSEDED_AFTER = 1 * DAY
UNUSED_AFTER = 30 * DAY
LEFTOVER_AFTER = 3600.0


@dataclass(frozen=True)
class CacheItem:
    """One directory in the cache: an entry (``model`` set) or a leftover build/trash."""

    name: str
    model: str | None
    leftover: bool
    idle: float  # seconds since last use or write


def to_remove(items: list[CacheItem], keep: str) -> list[str]:
    """The names the rule removes; ``keep`` is the entry the calling process uses."""
    kept_model = entry_model(keep)
    doomed = []
    for item in items:
        if item.name == keep:
            continue
        if item.leftover:
            stale = item.idle > LEFTOVER_AFTER
        elif item.model is None:
            stale = False  # not ours
        elif item.model == kept_model:
            stale = item.idle > SUPERSEDED_AFTER
        else:
            stale = item.idle > UNUSED_AFTER
        if stale:
            doomed.append(item.name)
    return doomed


def scan(cache_dir: Path, now: float) -> list[CacheItem]:
    items = []
    for path in cache_dir.iterdir():
        leftover = path.name.startswith((STAGING_PREFIX, TRASH_PREFIX))
        model = entry_model(path.name)
        if not path.is_dir() or (model is None and not leftover):
            continue
        try:
            idle = now - last_used(path)
        except OSError:
            continue  # removed meanwhile by another process
        items.append(CacheItem(path.name, model, leftover, idle))
    return items


def prune(cache_dir: Path, keep: str, now: float | None = None) -> list[str]:
    """Apply the rule to ``cache_dir``; returns what was removed. Never raises: the cache is
    an optimisation, and failing to tidy it must not fail a load."""
    try:
        doomed = to_remove(scan(cache_dir, time.time() if now is None else now), keep)
    except OSError as exc:
        log.debug("cannot prune %s: %s", cache_dir, exc)
        return []
    removed = [name for name in doomed if remove_entry(cache_dir / name)]
    if removed:
        log.info("removed %d unused embedder graph(s) from %s", len(removed), cache_dir)
    return removed
