"""Running an agent's own CLI as the model (for users with a subscription and no API key).

An agent CLI can sit for minutes on a long answer, or hang for ever (a login prompt, a lost
connection). A wall clock alone cannot tell the two apart, so the call has two limits: an
*idle timeout* (no byte on stdout or stderr for that long — 60 s by default; Claude's
``stream-json`` output keeps printing while it works, which is why that format is asked for)
and a *wall cap*. Either one kills the CLI's whole process group and raises
:class:`CliFailed` saying which limit hit, never returns an empty answer.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from ember.learn.model import LearnError

__all__ = ["CLI_COMMANDS", "CliFailed", "CliRun", "answer_of", "run_cli"]

DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_WALL_TIMEOUT = 600.0
#: An answer larger than this is cut off (a CLI gone wrong must not fill the memory).
MAX_OUTPUT_BYTES = 16 * 1024 * 1024

#: How each CLI is asked one question, the prompt on its stdin.
CLI_COMMANDS: Mapping[str, Sequence[str]] = {
    "claude": ("claude", "-p", "--output-format", "stream-json", "--verbose"),
    "codex": ("codex", "exec", "--skip-git-repo-check", "-"),
    "gemini": ("gemini", "-p", "Follow the instructions given above."),
}


class CliFailed(LearnError):
    """The agent CLI could not answer: not found, timed out, or exited with an error."""


@dataclass(frozen=True)
class CliRun:
    stdout: str
    stderr: str
    seconds: float


def run_cli(
    argv: Sequence[str],
    prompt: str,
    *,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    wall_timeout: float = DEFAULT_WALL_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> CliRun:
    """Run ``argv`` with ``prompt`` on stdin; its output once it exits with status 0."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise CliFailed(f"cannot run {argv[0]!r}: {exc.strerror or exc}; is it installed?") from exc
    assert proc.stdin and proc.stdout and proc.stderr
    feeder = threading.Thread(target=_feed, args=(proc.stdin, prompt.encode()), daemon=True)
    feeder.start()
    start = time.monotonic()
    try:
        out, err = _collect(proc, start, idle_timeout, wall_timeout, argv[0])
        code = proc.wait(timeout=max(wall_timeout - (time.monotonic() - start), 1.0))
    except subprocess.TimeoutExpired as exc:
        _kill(proc)
        raise CliFailed(f"{argv[0]} did not exit within the {wall_timeout:g} s cap") from exc
    except BaseException:
        _kill(proc)
        raise
    finally:
        feeder.join(timeout=1.0)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()
    seconds = time.monotonic() - start
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if code != 0:
        tail = (stderr.strip() or stdout.strip())[-500:]
        raise CliFailed(f"{argv[0]} exited with status {code}: {tail or '(no output)'}")
    return CliRun(stdout, stderr, seconds)


def _feed(pipe: object, data: bytes) -> None:
    try:
        pipe.write(data)  # type: ignore[attr-defined]
        pipe.close()  # type: ignore[attr-defined]
    except (BrokenPipeError, OSError, ValueError):
        pass  # the CLI exited or stopped reading; its exit status tells why


def _collect(
    proc: subprocess.Popen[bytes], start: float, idle: float, wall: float, name: str
) -> tuple[bytes, bytes]:
    buffers = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for pipe in buffers:
        sel.register(pipe, selectors.EVENT_READ)  # type: ignore[arg-type]
    last = start
    try:
        while sel.get_map():
            now = time.monotonic()
            if now - start >= wall:
                _kill(proc)
                raise CliFailed(f"{name} was still running after the {wall:g} s cap; killed it")
            if now - last >= idle:
                _kill(proc)
                raise CliFailed(f"{name} printed nothing for {idle:g} s (idle timeout); killed it")
            wait = min(idle - (now - last), wall - (now - start))
            for key, _ in sel.select(timeout=max(wait, 0.01)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                last = time.monotonic()
                buffer = buffers[key.fileobj]  # type: ignore[index]
                if len(buffer) < MAX_OUTPUT_BYTES:
                    buffer.extend(chunk)
    finally:
        sel.close()
    return bytes(buffers[proc.stdout]), bytes(buffers[proc.stderr])


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the CLI and everything it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def answer_of(cli: str, stdout: str) -> str:
    """The model's answer in a CLI's output: Claude's ``stream-json`` ends with a ``result``
    event (an ``is_error`` one is a failure); the others print the answer as text."""
    if cli != "claude":
        return stdout
    result: str | None = None
    for line in stdout.splitlines():
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("type") == "result":
            if event.get("is_error"):
                raise CliFailed(f"claude reported an error: {event.get('result') or event}")
            result = str(event.get("result") or "")
    if result is None:
        raise CliFailed("claude's output had no result event (was --output-format ignored?)")
    return result
