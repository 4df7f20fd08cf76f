"""Every table ember keeps, as one ordered list of named migrations per kind of database.

- ``PROJECT``: ``$EMBER_HOME/projects/<name>-<digest>/ember.db`` (and the opt-in global store):
  the kernel's accounting, then each registered feature's tables (``ember.features``: the
  injection ledger and memory, shadow memory with the transcript and the steward's tables,
  traffic learning's sightings, then any installed feature's).
- ``STATS``: ``$EMBER_HOME/stats.db``, accounting of requests whose project is unknown, and
  the features' global tables (TOIN's statistics of tool-output structures: they name no
  project).

The order is the order a new database is built in. Databases in the field recorded the names
they applied (in whatever order their features first opened them), so names never change and
a new table is a new migration at the end of its feature's list. One list per database,
applied by its one owner: triggers that span tables of two features need both tables to exist,
which separate lists migrated by separate owners could not promise.

The lists are put together on first use, not at import: a feature's migrations are loaded
with the feature (an installed one's import may be slow, or fail with a message of its own).
"""

from __future__ import annotations

from ember.features import migrations
from ember.store.migrations import Migration, Schema
from ember.store.schema.accounting import ACCOUNTING


def _project() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *migrations("project"))


def _stats() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *migrations("stats"))


PROJECT = Schema("project", _project)
STATS = Schema("stats", _stats)

__all__ = ["PROJECT", "STATS"]
