"""How a client starts ``ember mcp``: the command line it runs (pure).

A client runs the server itself, from its own environment, often without the shell profile
that put a virtualenv's ``bin`` on PATH: a bare ``ember`` that resolves to nothing (or to
another install) leaves the client with a server that never starts, which Claude Code and
Codex report only as a tool list without ember's tools. So the command is ``ember`` only when
that name on PATH is this very install; otherwise this install's own script by its absolute
path, else this interpreter running the package.
"""

from __future__ import annotations

from pathlib import Path

#: The name the server is registered under: tools show as ``mcp__ember__memory_search``.
SERVER_NAME = "ember"


def ember_argv(on_path: str | None, own_script: Path | None, python: str) -> list[str]:
    """The argv that starts ``ember mcp``. ``on_path``: what ``ember`` resolves to on PATH
    (None: nothing); ``own_script``: this install's ``ember`` script (None when it has none);
    ``python``: this interpreter."""
    if own_script is not None and own_script.exists():
        if on_path is not None and _same(Path(on_path), own_script):
            return ["ember", "mcp"]
        return [str(own_script), "mcp"]
    return [python, "-m", "ember", "mcp"]


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
