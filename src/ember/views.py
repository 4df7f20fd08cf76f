"""What a feature shows on the dashboard: JSON routes over its own tables (``Feature.views``).

The dashboard (``ember.ui``) serves the page and the kernel's data (spend, sessions, requests);
each feature adds routes under ``/ui/api/<feature>/<path>`` that read, and sometimes change,
what that feature keeps. A route never gets a path from the page: it names a project by its
folder under ``$EMBER_HOME/projects`` and ``ViewContext.project_db`` turns that into the
project's database only if such a project exists (fail closed: an unknown or malformed name is
a 404, never another file and never a new empty database).

Routes that change data (``writes=True``) are served only to a caller that shows the
dashboard's per-process token (``ember.ui.guard``): a page on another origin cannot forget a
user's memories.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ember.errors import EmberError

if TYPE_CHECKING:
    from ember.config import Settings
    from ember.store.database import Database
    from ember.store.registry import Storage

__all__ = ["Query", "Route", "ViewContext", "ViewError"]

#: A project folder's name: ``<sanitised basename>-<16 hex digits>`` (``ember.project``).
_PROJECT_DIR = re.compile(r"^[A-Za-z0-9._-]{1,40}-[0-9a-f]{16}$")
#: The shared store of requests without a project (``unresolved_project = global``), kept
#: beside the projects, not among them (``ember.memory.router``).
GLOBAL = "global"


class ViewError(EmberError):
    """A request the dashboard refuses, with the HTTP status and a message for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ViewContext:
    """What a route may use: the settings, the process's storage (one owner per file, shared
    with the proxy when the dashboard is served by it), and the project databases."""

    settings: Settings
    storage: Storage

    @property
    def home(self) -> Path:
        return self.settings.home

    def project_path(self, name: str) -> Path:
        """The database of the project folder ``name``; ``ViewError(404)`` when the name is
        not a project folder's or the project has no database."""
        if name == GLOBAL:
            path = self.home / GLOBAL / "ember.db"
        elif _PROJECT_DIR.match(name):
            path = self.home / "projects" / name / "ember.db"
        else:
            raise ViewError(404, f"no project named {name!r}")
        if not self.storage.holds(path):  # a read never creates: a made-up name stays a 404
            raise ViewError(404, f"no project named {name!r} in {self.home}")
        return path

    def project_db(self, name: str) -> Database:
        return self.storage.database(self.project_path(name))


@dataclass(frozen=True)
class Query:
    """One call of a route: the project it names (None when it names none), the query
    string's values and, for a ``POST``, the JSON body."""

    project: str | None
    params: Mapping[str, str]
    body: Mapping[str, Any] = field(default_factory=dict)

    def needs_project(self) -> str:
        if not self.project:
            raise ViewError(400, "name the project: ?project=<folder under projects/>")
        return self.project

    def text(self, name: str, default: str | None = None) -> str:
        value = self.body.get(name, self.params.get(name, default))
        if value is None or not isinstance(value, str) or not value.strip():
            raise ViewError(400, f"{name!r} is missing: give it as text")
        return value

    def number(self, name: str, default: int, lo: int = 0, hi: int = 100_000) -> int:
        raw = self.params.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ViewError(400, f"{name}={raw!r} is not a whole number") from None
        if not lo <= value <= hi:
            raise ViewError(400, f"{name}={value} is out of range ({lo}..{hi})")
        return value


@dataclass(frozen=True)
class Route:
    """``GET``/``POST /ui/api/<feature>/<path>``; ``handler`` runs in a worker thread and
    returns what is sent as JSON. ``writes``: it changes data (the token is required)."""

    method: Literal["GET", "POST"]
    path: str
    handler: Callable[[ViewContext, Query], Any]
    writes: bool = False
