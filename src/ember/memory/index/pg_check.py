"""Whether a project's memory indexes on PostgreSQL agree with its memories.

On SQLite, ``PRAGMA integrity_check`` vouches for a file and FTS5 keeps its own table; on
PostgreSQL the keyword and vector indexes are tables ember writes beside the memories
(``pg_text.py``, ``pgvector.py``), in the memory's own transaction. A write cut half-way
(a ``kill -9``, a lost connection) must leave all of them or none: these checks are what a
soak and ``ember doctor`` ask after one, each a count of rows that should not exist.

- every current memory has its keyword row, and every keyword row, term and graph row has
  its memory (a memory missing from the index is never found by words; an index row of no
  memory would rank a deleted fact). A superseded memory is history, out of the indexes by
  design (``upkeep.close``): counted as missing, every project whose facts changed value
  was reported damaged;
- the keyword statistics are the sums of the rows (BM25's document count and average
  length: off, every score drifts from SQLite's);
- every stored vector is in the graph and every graph row has a stored vector.
"""

from __future__ import annotations

from typing import Any

_CHECKS: tuple[tuple[str, str], ...] = (
    (
        "memories missing from the keyword index",
        "SELECT COUNT(*) FROM memories m WHERE m.valid_until IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM memory_doclen d WHERE d.seq = m.seq)",
    ),
    (
        "keyword rows of no memory",
        "SELECT COUNT(*) FROM memory_doclen d "
        "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = d.seq)",
    ),
    (
        "term rows of no memory",
        "SELECT COUNT(*) FROM memory_terms t "
        "WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = t.seq)",
    ),
    (
        "keyword statistics that are not the rows' sums",
        "SELECT COUNT(*) FROM memory_text_stats s "
        "WHERE s.docs <> (SELECT COUNT(*) FROM memory_doclen) "
        "OR s.tokens <> (SELECT COALESCE(SUM(len), 0) FROM memory_doclen)",
    ),
)
_GRAPH: tuple[tuple[str, str], ...] = (
    (
        "stored vectors missing from the graph",
        "SELECT COUNT(*) FROM memory_vectors v "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_vec g WHERE g.seq = v.seq)",
    ),
    (
        "graph rows of no stored vector",
        "SELECT COUNT(*) FROM memory_vec g "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.seq = g.seq)",
    ),
)


def problems(conn: Any) -> dict[str, int]:
    """Each disagreement found, with its row count; empty when the indexes agree. ``conn``:
    a connection on the project's schema (``PgDatabase.read``)."""
    found: dict[str, int] = {}
    graph = conn.execute("SELECT to_regclass('memory_vec') IS NOT NULL").fetchone()[0]
    for what, sql in _CHECKS + (_GRAPH if graph else ()):
        n = int(conn.execute(sql).fetchone()[0])
        if n:
            found[what] = n
    return found
