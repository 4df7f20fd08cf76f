"""Run the agent CLI in the foreground and hand its exit status back.

The client stays in our process group, so it owns the terminal exactly as if the user had
started it: it reads the keyboard, and a Ctrl-C typed at it reaches it straight from the
terminal driver. Forwarding that SIGINT as well would deliver it twice, and Claude Code exits
on a second Ctrl-C; so SIGINT and SIGQUIT are forwarded only when the terminal cannot have
delivered them (no controlling terminal, or we are not its foreground job: a script or a
supervisor sent them to us alone). SIGTERM and SIGHUP are always forwarded. Meanwhile we only
wait: the proxy is stopped after the client has exited, never under it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from ember.errors import ClientError

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT)


def run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> int:
    """The client's exit status; a client killed by signal N gives ``128 + N``, as a shell
    reports it."""
    tty = _open_tty()
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        if proc is None or (signum in _FROM_TERMINAL and _foreground(tty)):
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    # Python-level handlers (never SIG_IGN, which a child would inherit) revert to the default
    # in the client when it execs.
    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    try:
        try:
            proc = subprocess.Popen(list(argv), env=env, cwd=cwd)
        except OSError as exc:
            raise ClientError(f"cannot run {argv[0]}: {exc}") from exc
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if tty is not None:
            os.close(tty)
    return 128 - code if code < 0 else code


def _open_tty() -> int | None:
    try:
        return os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None


def _foreground(tty: int | None) -> bool:
    """Whether our process group is the terminal's foreground job, so a Ctrl-C typed there
    reached the client (same group) on its own."""
    if tty is None:
        return False
    try:
        return os.tcgetpgrp(tty) == os.getpgrp()
    except OSError:
        return False
