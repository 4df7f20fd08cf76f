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

And for a merge (a second home into a store already in use), how rows are told apart:

- ``RENUMBERED``: tables whose key is a number the store hands out (``exchanges.id``,
  ``memories.seq``, ``transcript_messages.seq``...). Two homes each count from 1, so their
  numbers say nothing about which rows are the same: a row is found by its ``natural`` key
  (a memory by its id, an exchange by its session and time) and keeps the number it has in
  the target; a new row gets a number past the target's (``renumber``), and every column
  that points at it (foreign keys, from the catalog) follows.
- ``WATERMARKS``: columns that hold a position in a renumbered table with no foreign key to
  say so (shadow memory's cursors: "read up to transcript seq N"). Mapped to the same place
  among the copied rows: a session read up to its 40th message stays read up to it.
- ``TARGET_KEEPS``: tables whose row under a key the target already has stays the target's
  when the source's differs (one entity per name, a project's shadow activation written
  once, learned statistics): counted as kept, not as a conflict, since two homes legitimately
  hold different rows there.

A feature that joins PostgreSQL adds nothing anywhere unless one of its tables is kept by
a trigger or is an index: ``tests/store/copy/test_policy.py`` fails for a table a trigger
writes that is not named here or by its feature, and for a table of the PostgreSQL schemas
that the copy would neither copy nor name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True)
class Renumbered:
    """A table whose ``key`` the store hands out; ``natural``: the columns that say which
    row it is in any store (empty: every column but the key); ``nocase``: those of them
    compared without case (as their unique index does)."""

    key: str
    natural: tuple[str, ...] = ()
    nocase: tuple[str, ...] = ()


RENUMBERED: dict[str, Renumbered] = {
    "exchanges": Renumbered("id", ("session_id", "ts")),
    "memories": Renumbered("seq", ("id",)),
    "transcript_messages": Renumbered("seq", ("id",)),
    "memory_entities": Renumbered("id", ("name",), nocase=("name",)),
    "memory_relationships": Renumbered("id", ("source_id", "relation", "target_id")),
    "memory_evidence": Renumbered("id"),
    "shadow_proposal_evidence": Renumbered("id"),
    "steward_fact_evidence": Renumbered("id"),
}

#: "through": the last position read (inclusive); "from": the first one of a range
Edge = Literal["through", "from"]

#: table -> column -> (the renumbered table it is a position in, which edge)
WATERMARKS: dict[str, dict[str, tuple[str, Edge]]] = {
    "shadow_activation": {"through_seq": ("transcript_messages", "through")},
    "shadow_cursors": {"baseline_seq": ("transcript_messages", "through")},
    "shadow_starts": {"through_seq": ("transcript_messages", "through")},
    "steward_digested": {"through_seq": ("transcript_messages", "through")},
    "shadow_memory_runs": {
        "from_seq": ("transcript_messages", "from"),
        "through_seq": ("transcript_messages", "through"),
    },
    "steward_runs": {
        "from_seq": ("transcript_messages", "from"),
        "through_seq": ("transcript_messages", "through"),
    },
}

#: table -> why the target's row under a key stays when the source's differs
TARGET_KEEPS: dict[str, str] = {
    "memory_entities": "one entity per name: the target's, which its links point at",
    "shadow_activation": "written once per project: the target's watermark stays",
    "shaping_state": "learned shaping state: the target's stays",
    "toin_meta": "this store's own identity and marks",
    "toin_patterns": "learned statistics: the target's stay",
    "traffic_sightings": "a fact seen in both homes: the target's count stays",
}

#: tables keyed by a fixed number that is not handed out (one row per database)
FIXED_KEYS = frozenset({"shadow_activation"})


def after() -> dict[str, frozenset[str]]:
    """The tables each table must be copied after for its watermarks to be mapped."""
    return {t: frozenset(p for p, _ in cols.values()) for t, cols in WATERMARKS.items()}


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
