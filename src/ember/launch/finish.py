"""The hand-over between the last ``ember wrap`` out and the proxy a wrap started.

A session's last answer is read by shadow memory while the provider's cache is hot, and that
read is a provider call: often longer than the few seconds a stopping proxy gives it
(``shadow_stop_seconds``). Stopping the proxy when the client exits cut such a read off, the
fact was lost and the call, billed all the same, was recorded at $0. So the last wrap out does
not stop the proxy: it asks it to finish. The proxy keeps serving (a new wrap simply uses it),
finishes its reads for up to ``shadow_finish_seconds``, and stops by itself when no wrap uses
it any more.

The asking: the wrap writes ``run/finish-<port>/<token>.ask`` and sends the proxy ``SIGNAL``;
the proxy answers every ask it finds in ``<token>.json`` — still reading N sessions for up to S
seconds, stopping now, or staying (a wrap came meanwhile). A signal carries no answer, and two
wraps may ask at once: a file per ask keeps each answer with its asker.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ember.fsutil import PRIVATE_FILE, create_private, open_private, private_dirs
from ember.launch.proxyproc import alive

#: What the wrap sends to ask; its default action would end the proxy without flushing, so
#: ``ember proxy`` handles it from before it serves.
SIGNAL = signal.SIGUSR1

State = Literal["finishing", "stopping", "staying"]


@dataclass(frozen=True)
class Answer:
    state: State
    reading: int = 0  #: "finishing": sessions still being read
    seconds: float = 0.0  #: "finishing": at most this long


def folder(run_dir: Path, port: int) -> Path:
    return run_dir / f"finish-{port}"


def ask(run_dir: Path, port: int) -> Path:
    """A new ask (send ``SIGNAL`` next); returns its file, which ``wait`` takes."""
    where = folder(run_dir, port)
    private_dirs(where)
    path = where / f"{secrets.token_hex(8)}.ask"
    create_private(path)
    return path


def pending(run_dir: Path, port: int) -> list[Path]:
    """The asks not answered yet (the proxy's side)."""
    try:
        return sorted(folder(run_dir, port).glob("*.ask"))
    except OSError:
        return []


def answer(asks: list[Path], found: Answer) -> None:
    """Answer each ask (the proxy's side); an ask whose asker gave up is skipped."""
    text = json.dumps(asdict(found))
    for path in asks:
        if not path.exists():
            continue
        tmp = path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            with open(open_private(tmp, os.O_WRONLY | os.O_TRUNC), "w") as out:
                out.write(text)
            os.chmod(tmp, PRIVATE_FILE)
            os.replace(tmp, path.with_suffix(".json"))
            path.unlink()


def wait(path: Path, pid: int, timeout: float, poll: float = 0.02) -> Answer | None:
    """The proxy's answer to the ask at ``path``; None when the proxy ``pid`` is gone or did
    not answer within ``timeout``. Its files are removed either way."""
    reply = path.with_suffix(".json")
    deadline = time.monotonic() + timeout
    try:
        while True:
            found = _read(reply)
            if found is not None:
                return found
            if not alive(pid) or time.monotonic() > deadline:
                return _read(reply)
            time.sleep(poll)
    finally:
        for stale in (path, reply):
            with contextlib.suppress(OSError):
                stale.unlink()


def _read(path: Path) -> Answer | None:
    try:
        doc = json.loads(path.read_text())
        return Answer(doc["state"], int(doc.get("reading", 0)), float(doc.get("seconds", 0.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
