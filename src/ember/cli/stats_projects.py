"""Which projects hold sessions, for a bare ``ember stats`` that finds none in its own file.

A bare ``ember stats`` reads ``stats.db``: requests whose project could not be resolved. Most
requests name a project and are recorded in that project's database, so on a home full of
sessions it said "No sessions recorded" and a new user concluded nothing was recorded. It
now lists the projects that hold sessions, each with the command that shows them.

Reads only: each project file is opened read-only, nothing is migrated or created.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.project import project_dir_name
from ember.store.driver import connect

_SESSIONS = "SELECT COUNT(DISTINCT session_id), MAX(project) FROM exchanges WHERE origin = 'client'"


@dataclass(frozen=True)
class ProjectSessions:
    """One project folder: what named it (``identity``), how many sessions it holds, and the
    command that shows them; ``problem``: why the file could not be read."""

    folder: str
    identity: str | None
    sessions: int
    command: str | None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "identity": self.identity,
            "sessions": self.sessions,
            "command": self.command,
            "problem": self.problem,
        }


def project_sessions(home: Path, ember: str = "ember") -> list[ProjectSessions]:
    """The project folders under ``home`` that hold sessions (or could not be read), by
    folder name; ``ember``: how the commands spell the executable."""
    out = []
    for path in sorted((home / "projects").glob("*/ember.db")):
        folder = path.parent.name
        try:
            count, identity = _read(path)
        except Exception as exc:  # any file ember cannot read: say so, list the others
            why = f"cannot be read ({exc}); `{ember} doctor` checks it and says what to do"
            out.append(ProjectSessions(folder, None, 0, None, why))
            continue
        if count:
            out.append(ProjectSessions(folder, identity, count, _command(ember, folder, identity)))
    return out


def _read(path: Path) -> tuple[int, str | None]:
    conn = connect(path, readonly=True).conn
    try:
        count, identity = conn.execute(_SESSIONS).fetchone()
    finally:
        conn.close()
    return int(count or 0), identity if isinstance(identity, str) else None


def _command(ember: str, folder: str, identity: str | None) -> str:
    """``ember stats`` with the option that names this folder's project: the id a client
    sent (``--project-id``), the directory (``--cwd``), or, for a project named by its git
    remote, any checkout of it."""
    if identity is None:
        return f"{ember} stats --cwd <the project's directory>"
    if project_dir_name(identity, is_path=False) == folder:
        return f"{ember} stats --project-id {shlex.quote(identity)}"
    if identity.startswith("/") or identity[1:3] == ":/":
        return f"{ember} stats --cwd {shlex.quote(identity)}"
    return f"{ember} stats --cwd <a checkout of {identity}>"


def listing(found: list[ProjectSessions]) -> list[str]:
    """The lines a person reads: what holds sessions, and the command for each."""
    if not found:
        return []
    held = [p for p in found if p.problem is None]
    lines = [
        f"Sessions are recorded per project: {len(held)} project(s) hold "
        f"{sum(p.sessions for p in held)} session(s). See one with the command beside it:"
    ]
    width = max((len(str(p.identity)) for p in held), default=0)
    for p in found:
        if p.problem is not None:
            lines.append(f"  {p.folder}: {p.problem}")
        else:
            count = f"{p.sessions} session(s)"
            lines.append(f"  {p.identity!s:<{width}}  {count:>13}  {p.command}")
    return lines
