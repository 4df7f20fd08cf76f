"""The two ends of ``ember store copy``: an ember home (SQLite files) or a PostgreSQL URL.

A home holds one database file per project (``projects/<name>-<digest>/ember.db``), the
opt-in global store (``global/ember.db``) and ``stats.db``; a PostgreSQL store holds the same
as one schema each (``pg.names``). Each database is a ``Unit``, named by the path it has in a
home, so either end can name it.

Invariants, and what each prevents:

- A URL is shown only as ``redacted(url)``: no error or report holds the password.
- A source home must be an ember home (a folder with ``projects/``, ``global/`` or
  ``stats.db``) and a target home must be one, or be empty, or not exist yet: a typo in a
  path neither copies "nothing" with success nor scatters ember's folders into an unrelated
  directory.
- A schema copied back to a home goes to the folder the project had (``pg.catalog``: a
  comment the copy put on the schema, or the project's identity recorded in its exchanges),
  never only to a name guessed from the schema's lower-cased one: the proxy looks the
  project up by that folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from ember.errors import ConfigError, EmberError
from ember.store.pg.catalog import project_folder, schemas
from ember.store.pg.names import GLOBAL_SCHEMA, HOME_SCHEMA, schema_name
from ember.store.pg.url import SCHEMES, check_store_url, redacted, require_driver

Kind = Literal["project", "global", "stats"]
STATS_REL = PurePosixPath("stats.db")
GLOBAL_REL = PurePosixPath("global/ember.db")
#: The home a PostgreSQL end's units are named under (only relative paths matter).
PG_HOME = Path("/ember-home")


class CopyError(EmberError):
    """An end that cannot be copied from or to; the message says which and what to give."""


@dataclass(frozen=True)
class Unit:
    """One database: where it is in a home, and which schema holds it on PostgreSQL."""

    rel: PurePosixPath
    kind: Kind
    #: the schema on a PostgreSQL end (source side), else None
    schema: str | None = None

    @property
    def name(self) -> str:
        return str(self.rel.parent.name) if self.kind == "project" else self.kind


@dataclass(frozen=True)
class End:
    """``home`` for SQLite files, ``url`` for PostgreSQL (exactly one is set)."""

    home: Path | None = None
    url: str | None = None

    @property
    def postgres(self) -> bool:
        return self.url is not None

    def __str__(self) -> str:
        return redacted(self.url) if self.url is not None else str(self.home)


def parse(value: str) -> End:
    """``value`` as an end: a ``postgresql://`` URL (checked, the driver required) or a path
    (``~`` expanded). ``CopyError`` saying what is wrong, never echoing a URL."""
    scheme, sep, _ = value.partition("://")
    if sep and scheme.lower() in SCHEMES:
        try:
            url = check_store_url(value)
        except ValueError as exc:
            raise CopyError(f"the PostgreSQL URL {exc}") from None
        try:
            require_driver()
        except ConfigError as exc:
            raise CopyError(f"copying to or from PostgreSQL: {exc.problem}") from None
        assert url is not None
        return End(url=url)
    if sep:
        raise CopyError(f"{scheme}:// is neither an ember home (a folder) nor a postgresql:// URL")
    return End(home=Path(value).expanduser().resolve())


def same(a: End, b: End) -> bool:
    if a.home is not None and b.home is not None:
        return a.home == b.home
    return a.url is not None and b.url is not None and redacted(a.url) == redacted(b.url)


def is_home(path: Path) -> bool:
    return path.is_dir() and any((path / n).exists() for n in ("projects", "global", "stats.db"))


def check_target_home(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise CopyError(f"{path} is a file, not an ember home (a folder)")
    if path.exists() and any(path.iterdir()) and not is_home(path):
        raise CopyError(
            f"{path} is not an ember home (no projects/, global/ or stats.db) and not empty; "
            "give an ember home, an empty folder or a new path"
        )


def home_units(home: Path) -> list[Unit]:
    """The databases of a home: projects by folder name, then global, then stats."""
    if not is_home(home):
        raise CopyError(
            f"{home} is not an ember home (no projects/, global/ or stats.db); the default "
            "is ~/.ember (EMBER_HOME)"
        )
    found = [
        Unit(PurePosixPath("projects", p.parent.name, "ember.db"), "project")
        for p in sorted((home / "projects").glob("*/ember.db"))
        if p.is_file()
    ]
    if (home / "global" / "ember.db").is_file():
        found.append(Unit(GLOBAL_REL, "global"))
    if (home / "stats.db").is_file():
        found.append(Unit(STATS_REL, "stats"))
    return found


def server_units(conn: Any) -> list[Unit]:
    """The databases of a PostgreSQL store: every ember schema that has been migrated."""
    out: list[Unit] = []
    for schema in schemas(conn):
        if schema == HOME_SCHEMA:
            out.append(Unit(STATS_REL, "stats", schema))
        elif schema == GLOBAL_SCHEMA:
            out.append(Unit(GLOBAL_REL, "global", schema))
        elif (folder := project_folder(conn, schema)) is not None:
            out.append(Unit(PurePosixPath("projects", folder, "ember.db"), "project", schema))
    order = {"project": 0, "global": 1, "stats": 2}
    return sorted(out, key=lambda u: (order[u.kind], str(u.rel)))


def target_schema(unit: Unit) -> str:
    """The schema ``unit`` has on a PostgreSQL target."""
    return schema_name(PG_HOME, PG_HOME / unit.rel)
