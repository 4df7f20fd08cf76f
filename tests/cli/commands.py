"""Run ``ember`` commands as the console script does — through ``ember.cli.main`` and its
error handling, so a traceback or a bare exit shows exactly as a user would see it — but in
this process, each with its own captured stdout and stderr (not a test module).

Also a script: ``python tests/cli/commands.py`` reads ``{"env": {...}, "commands": [[...]]}``
as JSON on stdin and prints one result per command as JSON. The tests run it as another user
when they run as root, for whom no permission check ever fails.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    traceback: bool  # an exception escaped main(): the user would have seen a traceback


def run(args: Sequence[str], env: Mapping[str, str | None]) -> Ran:
    from ember.cli import main

    with CliRunner().isolation(env=dict(env)) as (out, err, _):
        argv, sys.argv = sys.argv, ["ember", *args]
        code, escaped = 0, False
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:
            code, escaped = 1, True
            sys.stderr.write(traceback.format_exc())
        finally:
            sys.argv = argv
        return Ran(code, out.getvalue().decode(), err.getvalue().decode(), escaped)


def clean_env(home: Path, **extra: str) -> dict[str, str | None]:
    """No EMBER_* setting of the machine's own; ``home`` as EMBER_HOME; 80 columns."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    return {**env, "EMBER_HOME": str(home), "COLUMNS": "80", **extra}


#: setpriv rather than subprocess's user=: the latter cannot exec a venv whose Python lives
#: under root's home.
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _nobody_env(home: str) -> dict[str, str]:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    child_env.update({"PYTHONPATH": str(ROOT), "HOME": home})
    return child_env


@functools.cache
def nobody_cannot_run() -> str | None:
    """Why ``nobody`` cannot run this checkout's Python and tests, or None when it can.

    A clone inside a directory closed to other users (``mktemp -d`` makes one of mode 0700)
    keeps ``nobody`` out of the venv and the sources: the permission cases cannot be run there
    and are skipped, saying so, instead of failing on a child that never started."""
    probe = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", "import ember.cli, tests.cli.commands"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=_nobody_env("/nonexistent"),
    )
    if probe.returncode == 0:
        return None
    return (
        f"the permission cases run as nobody (uid {NOBODY}), who cannot run {sys.executable} "
        f"with {ROOT}: a directory above it is closed to other users"
    )


def run_all(
    commands: Sequence[Sequence[str]], env: Mapping[str, str | None], *, other_user: bool
) -> list[Ran]:
    """Each command in order; ``other_user``: as ``nobody`` in a child process (root passes
    every permission check, so a permission test as root would test nothing)."""
    if not other_user:
        return [run(c, env) for c in commands]
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, str(Path(__file__))],
        input=json.dumps({"env": dict(env), "commands": [list(c) for c in commands]}),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=_nobody_env(str(env.get("HOME") or "/nonexistent")),
        check=True,
    )
    return [Ran(**r) for r in json.loads(done.stdout)]


if __name__ == "__main__":
    request = json.load(sys.stdin)
    results = [asdict(run(c, request["env"])) for c in request["commands"]]
    print(json.dumps(results))  # run() put sys.stdout back
