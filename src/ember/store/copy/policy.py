"""Which tables ``ember store copy`` copies row for row, and which it leaves to the target.

Every ordinary table both sides have is copied (``catalog``), except the few named here:

- ``BOOKKEEPING``: each database's own records of itself (the migrations it applied, its
  write counter). The target's are the target's: copied, they would claim migrations the
  target never ran.
- ``DERIVED`` (and each feature's ``Feature.derived``): tables whose rows follow from other
  tables. Copied row for row they would be counted twice (``spend_hours`` is kept by a
  trigger on ``exchanges``: each copied exchange already adds itself) or be wrong for the
  target (an index's postings are rebuilt from the memories by the index's own code,
  ``Feature.rebuild``: ``memory/copying.py``).
- ``OWNED_ROWS``: rows of a copied table that the target keeps for itself. ``memory_meta``'s
  vector counters are moved by the target's triggers as the vectors arrive, so the in-memory
  copy of any process reading the target (``memory/index/matrix.py``) sees the change and
  reloads; copying the source's numbers could set them back to a value that process has
  already seen.

A feature that joins PostgreSQL adds nothing anywhere unless one of its tables is kept by
a trigger or is an index: ``tests/store/copy/test_policy.py`` fails for a table a trigger
writes that is not named here or by its feature, and for a table of the PostgreSQL schemas
that the copy would neither copy nor name.
"""

from __future__ import annotations

import re

from ember.store.migrations import Migration

BOOKKEEPING = frozenset({"_migrations", "_ember_version", "sqlite_sequence"})

#: the kernel's tables not copied row for row -> why (a feature names its own:
#: ``Feature.derived``, rebuilt by ``Feature.rebuild``)
DERIVED: dict[str, str] = {
    "spend_hours": "kept by the trigger on exchanges as the copied rows arrive",
}

#: table -> (key column, the keys whose rows the target keeps for itself)
OWNED_ROWS: dict[str, tuple[str, frozenset[str]]] = {
    "memory_meta": ("key", frozenset({"vector_changes", "vector_added", "vector_generation"})),
}


def copied(name: str) -> bool:
    """Whether the rows of table ``name`` are copied (when both sides have it)."""
    return name not in BOOKKEEPING and name not in DERIVED


def owner(table: str, migrations: tuple[tuple[str, bool, tuple[Migration, ...]], ...]) -> str:
    """Why one side lacks ``table``, from the ``(feature, runs on postgres, migrations)``
    that create it."""
    created = re.compile(
        rf"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{re.escape(table)}\b", re.I
    )
    for feature, postgres, found in migrations:
        if any(created.search(m.sql) for m in found):
            if not postgres:
                return f"feature {feature} does not run on PostgreSQL yet"
            return f"the migration of feature {feature} that creates it has not run there"
    return "no migration of ember creates it (a table of a newer ember, or made by hand)"


#: ``INSERT INTO t``, ``UPDATE t`` (not ``DO UPDATE SET``, ``AFTER UPDATE ON``/``OF``)
TRIGGER_WRITES = re.compile(
    r"(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE(?:\s+OR\s+\w+)?)\s+(?!(?:SET|ON|OF)\b)(\w+)",
    re.IGNORECASE,
)


def trigger_written(sql: str) -> set[str]:
    """The tables the triggers of a migration write to: SQLite's trigger bodies and
    PostgreSQL's function bodies (``$$ ... $$``, plpgsql functions only run as triggers in
    ember's schemas)."""
    bodies = re.findall(r"CREATE\s+TRIGGER.*?\bEND;", sql, re.I | re.S)
    bodies += re.findall(r"\$\$(.*?)\$\$", sql, re.S)
    return {m.group(1) for body in bodies for m in TRIGGER_WRITES.finditer(body)}
