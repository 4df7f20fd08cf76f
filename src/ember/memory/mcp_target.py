"""Which project ``ember mcp`` serves: decided once, when it starts, or nothing is served.

``--project-id ID`` or ``--cwd DIR`` name it as for ``ember memory`` (the resolution the proxy
applies to its headers); without either, the working directory the client started the server
in. What never happens is a guess: a server that serves the wrong project hands one project's
memories to another's agent, and saves facts where no later session of the right project
finds them. So, at start:

- a ``--cwd`` that is not a directory is refused (a typo would have made a new, empty
  project and saved into it);
- an inherited working directory that names no project — the filesystem root or the home
  directory, where clients that know no project start their servers (one such server for
  every chat would pool all of them in one "project"), or a directory deleted under the
  process — serves nothing (``NoProjectHere``: no tools, no resources, the reason and the
  fix in its instructions and on stderr). It still starts: Codex is set up to require the
  server (its tools come only then, ``ember setup codex --mcp``), and a required server that
  exits stops Codex from starting at all in the home directory;
- unless the user chose ``unresolved_project = global``: then the shared store is served, as
  the proxy serves it for requests without a project, and the log says it is the leak risk
  it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.config import Settings
from ember.errors import ProjectError
from ember.project import ProjectRef, identified, project_from_cli
from ember.store.registry import stats_db_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    """The project a server serves (``ref`` None: the opt-in shared store), the database its
    memories live in, and the one its requests are accounted in."""

    ref: ProjectRef | None
    path: Path
    spend_path: Path

    @property
    def label(self) -> str:
        return self.ref.identity if self.ref is not None else "global (no project)"


def served(
    settings: Settings,
    project_id: str | None,
    cwd: Path | None,
    workdir: Callable[[], str] = os.getcwd,
    home_dir: Callable[[], Path] = Path.home,
) -> Served:
    """The project to serve, or ``ProjectError`` saying why there is none and what to pass."""
    if cwd is not None and not cwd.expanduser().is_dir():
        raise ProjectError(f"--cwd {cwd} is not a directory: give the project's directory")
    if project_id is not None and not project_id.strip():
        raise ProjectError("--project-id is empty: give the project's id")
    if project_id or cwd is not None:
        ref = project_from_cli(
            project_id, str(cwd) if cwd is not None else None, settings.project_identity
        )
        if ref is None:  # one of them was given: resolution cannot come back empty
            raise ProjectError("no project to serve: give --cwd DIR or --project-id ID")
        return Served(ref, ref.db_path(settings.home), ref.db_path(settings.home))
    ref, why = _inherited(workdir, home_dir)
    ref = identified(ref, settings.project_identity)
    if ref is not None:
        return Served(ref, ref.db_path(settings.home), ref.db_path(settings.home))
    if settings.unresolved_project == "global":
        from ember.memory.router import global_db_path  # the store's modules: only here

        path = global_db_path(settings.home)
        log.warning(
            "ember mcp: %s; unresolved_project = global: serving the shared store %s, where "
            "the memories of every project without one are pooled",
            why,
            path,
        )
        return Served(None, path, stats_db_path(settings.home))
    raise NoProjectHere(
        f"no project to serve: {why}. Start it with --cwd DIR (the project's directory) or "
        "--project-id ID, or start the agent in the project; memories are kept per project, "
        "and serving another's would hand its memories to this agent (unresolved_project = "
        "global opts into one shared store)"
    )


class NoProjectHere(ProjectError):
    """The directory the client started the server in names no project: nothing is served.
    (A ``--cwd`` or ``--project-id`` the user typed wrong is a plain ``ProjectError``: the
    server does not start, since a typo must not pass for an empty project.)"""


def _inherited(
    workdir: Callable[[], str], home_dir: Callable[[], Path]
) -> tuple[ProjectRef | None, str]:
    """The working directory as a project, or None with the reason it is not one."""
    try:
        where = Path(workdir()).resolve()
    except OSError as exc:
        return None, f"the working directory cannot be read ({exc.strerror or exc})"
    if where == Path(where.anchor):
        return None, f"the working directory is the filesystem root ({where})"
    try:
        home = home_dir().resolve()
    except (OSError, RuntimeError):
        home = None
    if where == home:
        return None, f"the working directory is the home directory ({where})"
    return project_from_cli(None, str(where)), ""
