"""Which PostgreSQL schema holds what a file in ``EMBER_HOME`` would have held.

``Storage.database(path)`` is asked for the path a project's SQLite file has; on PostgreSQL the
same path names one schema:

- ``projects/<name>-<digest>/ember.db`` -> ``ember_p_<name>_<digest>``
- ``stats.db`` (the home's: requests of no project, global tables) -> ``ember_home``
- ``global/ember.db`` (the opt-in global store) -> ``ember_global``
- any other path (a test's, a tool's) -> ``ember_f_<stem>_<digest of the path>``

Invariants, and what each prevents:

- Two paths never share a schema: the project's digest (``ember.project``: the sha256 of its
  identity) is kept whole, and another path's name ends with a digest of the whole path; the
  readable part is cosmetic, cut and lowercased to fit.
- A name is at most 63 bytes (PostgreSQL's limit, past which it silently truncates, and two
  long project names would meet in one schema) and only ``[a-z0-9_]``: it is always quoted as
  an identifier too, but never needs to be.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: PostgreSQL's identifier limit (NAMEDATALEN - 1).
MAX_NAME = 63
HOME_SCHEMA = "ember_home"
GLOBAL_SCHEMA = "ember_global"
_PROJECT_DIR = re.compile(r"^(?P<label>.*)-(?P<digest>[0-9a-f]{16})$")
_UNSAFE = re.compile(r"[^a-z0-9]+")


def schema_name(home: Path, path: Path) -> str:
    """The schema that holds what ``path`` (a database file under ``home``) would hold."""
    try:
        rel = path.relative_to(home).parts
    except ValueError:
        rel = ()
    if rel == ("stats.db",):
        return HOME_SCHEMA
    if rel == ("global", "ember.db"):
        return GLOBAL_SCHEMA
    if len(rel) == 3 and rel[0] == "projects" and rel[2] == "ember.db":
        found = _PROJECT_DIR.match(rel[1])
        if found is not None:
            return _named("ember_p_", found["label"], found["digest"])
    digest = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:16]
    return _named("ember_f_", path.stem, digest)


def _named(prefix: str, label: str, digest: str) -> str:
    room = MAX_NAME - len(prefix) - len(digest) - 1
    cleaned = _UNSAFE.sub("_", label.lower()).strip("_")[:room].strip("_") or "x"
    return f"{prefix}{cleaned}_{digest}"
