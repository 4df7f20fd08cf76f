"""A checkout's name shared by every machine: the normalised URL of its git remote.

Projects are named by the directory the agent works in, and the same repository sits at
``/home/alice/acme`` on one machine and ``/Users/bob/src/acme`` on another: on a team's
PostgreSQL store they were two projects, and what one developer's sessions taught
never reached the other's. With ``project_identity = "git-remote"`` a directory inside a git
checkout is named by its remote instead (``origin``, else the first one), so both are the
project ``github.com/acme/api``.

Invariants, and what each prevents:

- One spelling per repository: ``git@github.com:Acme/api.git``,
  ``https://user:token@github.com/Acme/api`` and ``ssh://git@github.com/Acme/api.git/`` are
  all ``github.com/Acme/api`` (scheme, user, password, port, ``.git`` and slashes dropped,
  the host lowercased): clones made by ssh and by https meet. A credential in a remote URL
  never reaches a project name, a log or a table.
- Only what git itself wrote is read (``.git/config``, a worktree's ``commondir``), never a
  ``git`` process: the proxy asks for every request, and a child process per request would
  cost more than the request. The answer is cached per directory for the process's life (a
  remote renamed later is seen after a restart).
- No checkout, no remote, an unreadable file: None, and the caller keeps the path (nothing
  fails, and a directory outside git is the project it always was).
"""

from __future__ import annotations

import configparser
import functools
import re
from pathlib import Path

#: ``user@host:path`` (scp-like syntax, no scheme)
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")
_URL = re.compile(
    r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?(?P<host>[^/:]+)(?::\d*)?(?P<path>/.*)?$", re.IGNORECASE
)
#: directories walked up from the working directory at most
MAX_DEPTH = 64


def normalized(url: str) -> str | None:
    """``host/path`` of a remote URL, or None for one that names no host (a local path)."""
    url = url.strip()
    found = _URL.match(url) or (None if "://" in url else _SCP.match(url))
    if found is None:
        return None
    host = found["host"].lower()
    path = (found["path"] or "").strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    return f"{host}/{path}" if path else None


@functools.lru_cache(maxsize=1024)
def remote_of(directory: str) -> str | None:
    """The normalised remote of the git checkout holding ``directory``, or None."""
    config = _config_of(Path(directory))
    if config is None:
        return None
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(config.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return None
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = parser.get(section, "url", fallback="")
        name = normalized(url) if url else None
        if name is not None:
            return name
    return None


def _config_of(directory: Path) -> Path | None:
    """The ``config`` file of the checkout holding ``directory`` (a worktree's common one)."""
    here = directory
    for _ in range(MAX_DEPTH):
        dot = here / ".git"
        try:
            if dot.is_dir():
                return dot / "config"
            if dot.is_file():
                return _linked_config(here, dot)
        except OSError:
            return None
        if here.parent == here:
            return None
        here = here.parent
    return None


def _linked_config(top: Path, dot: Path) -> Path | None:
    """A worktree's or submodule's ``.git`` file: ``gitdir: <path>``; the config is in the
    git dir's ``commondir`` when it has one (a worktree), else in the git dir."""
    try:
        line = dot.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line[len("gitdir:") :].strip())
    gitdir = gitdir if gitdir.is_absolute() else top / gitdir
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return gitdir / "config"
    base = Path(common)
    return (base if base.is_absolute() else gitdir / base) / "config"
