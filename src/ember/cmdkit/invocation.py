"""The command that runs this ember, as a hint to the user should spell it.

A hint that says ``ember stats`` is wrong for a user who installed ember into a checkout's
virtualenv and ran ``.venv/bin/ember``: ``ember`` is not on their PATH, so the printed command
fails. Hints name ``ember`` only when that name on PATH is the running executable; otherwise
its path, relative to the working directory when it is below it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

_NAMES = ("ember", "ember.exe")


def ember_command(
    argv0: str | None = None, executable: str | None = None, cwd: str | None = None
) -> str:
    """``ember``, ``.venv/bin/ember``, ``/opt/ember/bin/ember`` or ``.venv/bin/python -m
    ember``: what runs this ember from ``cwd`` (defaults: this process's ``sys.argv[0]``,
    ``sys.executable`` and working directory), quoted for a POSIX shell."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    here = os.getcwd() if cwd is None else cwd
    if Path(argv0).name in _NAMES:
        if os.sep not in argv0 and "/" not in argv0:
            return "ember"  # found on PATH by the shell that ran it
        script = os.path.join(here, argv0)
    else:  # ``python -m ember``, or ember's code inside another program (a test, a script)
        sibling = Path(executable).parent / "ember"
        script = str(sibling) if sibling.is_file() else ""
    if script:
        found = shutil.which("ember")
        if found is not None and os.path.realpath(found) == os.path.realpath(script):
            return "ember"
        return shlex.quote(_shown(script, here))
    return f"{shlex.quote(_shown(executable, here))} -m ember"


def _shown(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it is below it (``./ember`` rather than ``ember``,
    which a shell would look up on PATH), else absolute; symlinks kept (a virtualenv's
    ``python`` is a link to the interpreter, which does not see the virtualenv's packages)."""
    full = os.path.normpath(os.path.join(cwd, path))
    rel = os.path.relpath(full, cwd)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return full
    return rel if os.sep in rel else os.curdir + os.sep + rel
