"""Every table ember keeps, as one ordered list of named migrations per kind of database.

- ``PROJECT``: ``$EMBER_HOME/projects/<name>-<digest>/ember.db`` (and the opt-in global store):
  accounting, the injection ledger, memory, shadow memory (with the steward's tables) — and
  every feature that comes next appends here.
- ``STATS``: ``$EMBER_HOME/stats.db``, accounting of requests whose project is unknown, and
  TOIN's statistics of tool-output structures (global: they name no project).

The order is the order a new database is built in. Databases in the field recorded the names
they applied (in whatever order their features first opened them), so names never change and
a new table is a new migration at the end. One list per database, applied by its one owner:
triggers that span tables of two features need both tables to exist, which separate lists
migrated by separate owners could not promise.
"""

from __future__ import annotations

from ember.store.migrations import Schema
from ember.store.schema.accounting import ACCOUNTING
from ember.store.schema.ledger import LEDGER
from ember.store.schema.memory import MEMORY
from ember.store.schema.shadow import SHADOW
from ember.store.schema.toin import TOIN
from ember.store.schema.traffic import TRAFFIC

PROJECT = Schema("project", (*ACCOUNTING, *LEDGER, *MEMORY, *SHADOW, *TRAFFIC))
STATS = Schema("stats", (*ACCOUNTING, *TOIN))

__all__ = ["PROJECT", "STATS"]
