"""``ember store copy``: every project (and the global store and stats) from an ember home to a
PostgreSQL store or back, or into a store already in use (a merge), counted, verified and
idempotent.

``ends`` (what the two ends are and hold), ``source`` (read-only snapshots), ``catalog`` (the
tables each side has, from its own catalog), ``policy`` (the few tables not copied row for
row, and how rows are found in a merge), ``renumber`` (new numbers in a store in use, and
the references that follow them), ``load`` (batches in, conflicts counted), ``run`` (one
transaction per database), ``rehearsal`` (the target's owner, and ``--dry-run``),
``report`` (what happened, for people and scripts).
"""

from __future__ import annotations

from ember.store.copy.ends import CopyError, End, parse
from ember.store.copy.report import CopyReport, TableReport, UnitReport
from ember.store.copy.run import Progress, copy_store

__all__ = [
    "CopyError",
    "CopyReport",
    "End",
    "Progress",
    "TableReport",
    "UnitReport",
    "copy_store",
    "parse",
]
