"""Every table ember keeps, as one ordered list of named migrations per kind of database.

- ``PROJECT``: ``$EMBER_HOME/projects/<name>-<digest>/ember.db`` (and the opt-in global store):
  the kernel's accounting, then each registered feature's tables (``ember.installed``: the
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

A PostgreSQL store (``store_url``) applies ``for_postgres(schema)``: the kernel's
migrations and those of the features that run there (``Feature.postgres``), each in its
``postgres`` form. A feature joins it by writing that form for each of its migrations and
setting ``postgres=True``: its names then apply, in list order, to schemas already in use.

The lists are put together on first use, not at import: a feature's migrations are loaded
with the feature (an installed one's import may be slow, or fail with a message of its own).
"""

from __future__ import annotations

from ember import installed
from ember.store.migrations import Migration, Schema
from ember.store.schema.accounting import ACCOUNTING


def _features(database: str, *, postgres: bool = False) -> tuple[Migration, ...]:
    """The registered features' part of ``database``, as ``ember.compose`` installed them
    (``ember.installed``; ``NotInstalled`` before that)."""
    return installed.parts().migrations(database, postgres=postgres)


def _project() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *_features("project"))


def _stats() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *_features("stats"))


def _pg_project() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *_features("project", postgres=True))


def _pg_stats() -> tuple[Migration, ...]:
    return (*ACCOUNTING, *_features("stats", postgres=True))


PROJECT = Schema("project", _project)
STATS = Schema("stats", _stats)
PG_PROJECT = Schema("project", _pg_project)
PG_STATS = Schema("stats", _pg_stats)


def for_postgres(schema: Schema) -> Schema:
    """What a PostgreSQL store applies for ``schema``: the ember schemas' parts that run
    there; any other schema (a test's, a plugin's own) as it is (refused when unported)."""
    if schema is PROJECT:
        return PG_PROJECT
    if schema is STATS:
        return PG_STATS
    return schema


__all__ = ["PG_PROJECT", "PG_STATS", "PROJECT", "STATS", "for_postgres"]
