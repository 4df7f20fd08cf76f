"""Run two blocking reads of one search at the same time, never slower than one after the other.

SQLite (``sqlean``) and onnxruntime release the GIL while they work, so a search's keyword side
and its query embedding + vector side can overlap on two cores. The pool is shared by every
store of the process and created on the first search (start-up and idle memory unchanged).

The invariant: the caller never waits for a pool thread that has not started its work. When
every pool thread is busy (many searches at once), the queued half is taken back and run by
the caller itself, so under load a search costs what it did sequentially, and no search can
wait behind another's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _workers() -> int:
    return max(2, min(4, os.cpu_count() or 2))


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_workers(), thread_name_prefix="ember-search")
        return _pool


def both(aside: Callable[[], A], inline: Callable[[], B]) -> tuple[A, B]:
    """``(aside(), inline())``: ``aside`` on a pool thread while ``inline`` runs here.

    An exception from either is raised here (``inline``'s first, since it is seen first).
    """
    future: Future[A] = _shared_pool().submit(aside)
    try:
        b = inline()
    except BaseException:
        future.cancel()
        raise
    if future.cancel():  # no pool thread had picked it up: do it here rather than wait
        return aside(), b
    return future.result(), b


def one_after_other(aside: Callable[[], A], inline: Callable[[], B]) -> tuple[A, B]:
    """``both`` without the pool: the reference order, for comparisons and benchmarks."""
    b = inline()
    return aside(), b
