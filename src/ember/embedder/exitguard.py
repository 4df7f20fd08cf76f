"""Native model code never runs while the interpreter shuts down.

The failure this prevents (``make demo`` aborting with ``terminate called without an active
exception``, or an onnxruntime ``GetElementType is not implemented`` error first): the embedder
loads in a daemon thread, and onnxruntime releases the GIL while it builds a session or runs one.
When the main thread returns while that native call is in flight, Python finalises and the C
runtime destroys onnxruntime's static objects under the running call (which then throws from a
kernel: ``GetElementType``), and the daemon thread, on its way back into Python, is stopped with
``pthread_exit`` inside pybind11's ``noexcept`` GIL guard: ``std::terminate``. Reproduced by
exiting 0-0.2 s into ``InferenceSession()`` in a loader thread (27 aborts in 30 runs) and during
a ``session.run`` in a daemon thread (the ``GetElementType`` message).

The rule: every stretch of native model work runs inside ``native_work()``. At exit (an
``atexit`` hook, which runs before finalisation, while daemon threads still run), the guard
closes: no new stretch may start (it raises ``EmbedderUnavailable``) and the exit waits, at most
``EXIT_WAIT`` seconds, for the ones in flight. A load that has not started its native part yet
(still looking for files, or downloading) is not waited for.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from ember.embedder.errors import EmbedderUnavailable

log = logging.getLogger(__name__)

#: How long the exit waits for native work in flight. A load takes ~2 s and a batch ~10 ms on
#: a loaded 2-core machine; past this the process exits anyway (and may abort as before).
EXIT_WAIT = 60.0


class ExitGuard:
    """Counts native stretches in flight; ``close`` waits for them and refuses new ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False
        self._hooked = False

    @contextmanager
    def native_work(self) -> Iterator[None]:
        with self._cond:
            if self._closed:
                raise EmbedderUnavailable("the process is exiting; no model work starts now")
            if not self._hooked:  # registered on first use: importing ember costs nothing
                atexit.register(self.close)
                self._hooked = True
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @property
    def active(self) -> int:
        with self._cond:
            return self._active

    def close(self, timeout: float = EXIT_WAIT) -> bool:
        """Refuse new work and wait for the work in flight; False if it outlasted ``timeout``."""
        with self._cond:
            self._closed = True
            if self._active:
                log.info("waiting for the embedder to finish before exiting")
            done = self._cond.wait_for(lambda: self._active == 0, timeout)
        if not done:
            log.warning("exiting while the embedder is still busy after %.0fs", timeout)
        return done


GUARD = ExitGuard()


def native_work() -> AbstractContextManager[None]:
    """``with native_work():`` around native model code (onnxruntime, tokenizers, safetensors)
    that may run on a background thread; raises ``EmbedderUnavailable`` once exit has begun."""
    return GUARD.native_work()
