"""No onnxruntime call runs while the interpreter shuts down (the `make demo` abort)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from ember.embedder import Embedder, EmbedderUnavailable
from ember.embedder import exitguard as exitguard_module
from ember.embedder.exitguard import ExitGuard


def test_exit_waits_for_native_work_in_flight_and_refuses_new_work() -> None:
    guard = ExitGuard()
    inside, release = threading.Event(), threading.Event()

    def work() -> None:
        with guard.native_work():
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=work)
    worker.start()
    assert inside.wait(30)
    assert not guard.close(timeout=0.05)  # still in flight: exit would have to wait
    threading.Timer(0.1, release.set).start()
    started = time.monotonic()
    assert guard.close(timeout=30)
    assert time.monotonic() - started >= 0.05 and guard.active == 0
    worker.join(30)
    with pytest.raises(EmbedderUnavailable, match="exiting"), guard.native_work():
        pass


def test_an_embed_after_exit_began_fails_open_instead_of_starting_onnxruntime(
    minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = ExitGuard()
    closed.close()
    monkeypatch.setattr(exitguard_module, "GUARD", closed)
    with pytest.raises(EmbedderUnavailable, match="exiting"):
        minilm.embed(["a daemon thread still embedding at exit"])


# The process exits 0-100 ms after the loader thread entered onnxruntime's session constructor.
# Before the guard this aborted in 27 of 30 runs with "terminate called without an active
# exception" (exit code 134).
EXIT_DURING_LOAD = """
import sys, threading, time
import onnxruntime
from ember.embedder import preload

entered = threading.Event()
Session = onnxruntime.InferenceSession

class Spy(Session):
    def __init__(self, *args, **kwargs):
        entered.set()
        super().__init__(*args, **kwargs)

onnxruntime.InferenceSession = Spy
loader = preload("onnx", "all-MiniLM-L6-v2", None)
assert entered.wait(120), "the load never reached onnxruntime"
time.sleep(float(sys.argv[1]))
print("loaded before exit:", loader.done(), flush=True)
"""


def test_exiting_while_the_model_loads_in_the_background_does_not_abort() -> None:
    run = subprocess.run(
        [sys.executable, "-c", EXIT_DURING_LOAD, "0.05"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "terminate called" not in run.stderr
    assert run.returncode == 0, run.stderr
    assert "loaded before exit: False" in run.stdout  # the exit really began mid-load
