"""The keyword index on PostgreSQL, scoring exactly as FTS5 does (issue #24).

PostgreSQL's own full text stems with Snowball's English (not FTS5's porter) and ranks with
``ts_rank`` (not BM25), so a search there would pick other candidates and feed other numbers
into the one calibrated score. This index keeps what FTS5 keeps instead — every token of a
memory, folded and porter-stemmed by ``retrieval.lexical`` (the tokenizer that mirrors
``unicode61`` + ``porter``), with its positions — and computes FTS5's ``bm25()`` in SQL with
its constants (k1 1.2, b 0.75), its IDF ``ln((N - n + 0.5) / (n + 0.5))`` clamped at 1e-6, the
whole index's statistics and its phrase rule: a quoted term of several tokens (``user_id``)
matches where they stand side by side. ``tests/memory/index/test_pg_text.py`` holds it to
FTS5's candidates and scores on the repository's own conversations.

It has ``FtsIndex``'s interface (the caller stems nothing: terms are the ask's words).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ember.memory.index.fts import POSTINGS_BUDGET, FtsIndex
from ember.memory.retrieval.lexical import tokens

#: The tables (the PostgreSQL side of the memory schema's FTS5 table).
DDL = """
CREATE TABLE memory_terms (
    stem TEXT NOT NULL,
    seq BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    pos INTEGER[] NOT NULL,
    PRIMARY KEY (stem, seq)
);
CREATE INDEX memory_terms_seq ON memory_terms (seq);
CREATE TABLE memory_doclen (seq BIGINT PRIMARY KEY, len INTEGER NOT NULL);
"""

_K1, _B = 1.2, 0.75


def postings(text: str) -> tuple[int, dict[str, list[int]]]:
    """The token count of ``text`` and each stem's positions, as FTS5 indexes them."""
    where: dict[str, list[int]] = defaultdict(list)
    toks = tokens(text)
    for i, (_, stem) in enumerate(toks):
        where[stem].append(i)
    return len(toks), dict(where)


def _hits(term: str, tag: int, params: list[Any]) -> str | None:
    """A ``SELECT tag, seq, tf`` of the memories holding ``term`` (a phrase when it has
    several tokens: each next token at the next position); None when it has no token."""
    stems = [s for _, s in tokens(term)]
    if not stems:
        return None
    if len(stems) == 1:
        params += [tag, stems[0]]
        return "SELECT ?::int AS term, seq, tf FROM memory_terms WHERE stem = ?"
    joins = "".join(
        f" JOIN memory_terms t{i} ON t{i}.seq = t0.seq AND t{i}.stem = ?"
        for i in range(1, len(stems))
    )
    near = " AND ".join(f"p + {i} = ANY(t{i}.pos)" for i in range(1, len(stems)))
    params += [tag, *stems[1:], stems[0]]
    return (
        f"SELECT ?::int AS term, t0.seq, (SELECT count(*) FROM unnest(t0.pos) AS p "
        f"WHERE {near})::int AS tf FROM memory_terms t0{joins} WHERE t0.stem = ?"
    )


class PgTextIndex(FtsIndex):
    """``FtsIndex`` on PostgreSQL: the same calls, candidates and BM25 numbers. Stateless, like
    it: every call names the connection (a ``store.pg.connection.PgConnection``)."""

    def __init__(self, postings_budget: int = POSTINGS_BUDGET) -> None:
        super().__init__(postings_budget)

    def add(self, conn: Any, seqs: Sequence[int], contents: Sequence[str]) -> None:
        self.remove(conn, seqs)
        terms, lengths = [], []
        for seq, content in zip(seqs, contents, strict=True):
            length, where = postings(content)
            lengths.append((seq, length))
            terms += [(stem, seq, len(pos), pos) for stem, pos in where.items()]
        conn.executemany("INSERT INTO memory_doclen (seq, len) VALUES (?, ?)", lengths)
        if terms:
            conn.executemany(
                "INSERT INTO memory_terms (stem, seq, tf, pos) VALUES (?, ?, ?, ?)", terms
            )

    def remove(self, conn: Any, seqs: Sequence[int]) -> None:
        if seqs:
            ids = list(seqs)
            conn.execute("DELETE FROM memory_terms WHERE seq = ANY(?)", (ids,))
            conn.execute("DELETE FROM memory_doclen WHERE seq = ANY(?)", (ids,))

    def rank(
        self,
        conn: Any,
        terms: Sequence[str],
        k: int | None,
        between: tuple[int, int] | None = None,
    ) -> list[tuple[int, float]]:
        """As ``FtsIndex.rank``: FTS5's ``-bm25()`` for the OR of ``terms``, best first, ties
        by seq; the statistics are the whole index's even when ``between`` narrows it."""
        if between is not None and between[0] > between[1]:
            return []
        params: list[Any] = []
        parts = [p for i, t in enumerate(terms) if (p := _hits(t, i, params)) is not None]
        if not parts:
            return []
        sql = (
            "WITH stats AS (SELECT count(*)::float8 AS n_docs, "
            "coalesce(avg(len), 0)::float8 AS avgdl FROM memory_doclen), "
            f"hits AS (SELECT * FROM ({' UNION ALL '.join(parts)}) h WHERE tf > 0), "
            "df AS (SELECT term, count(*)::float8 AS n FROM hits GROUP BY term) "
            "SELECT h.seq, sum(greatest(ln((s.n_docs - df.n + 0.5) / (df.n + 0.5)), 1e-6) "
            f"* h.tf * {_K1 + 1} / (h.tf + {_K1} * ({1 - _B} + {_B} * d.len / s.avgdl))) AS s "
            "FROM hits h JOIN df USING (term) JOIN memory_doclen d USING (seq) "
            "CROSS JOIN stats s"
        )
        if between is not None:
            sql += " WHERE h.seq BETWEEN ? AND ?"
            params += between
        sql += " GROUP BY h.seq ORDER BY s DESC, h.seq"
        if k is not None:
            sql += " LIMIT ?"
            params.append(k)
        return [(int(r[0]), float(r[1])) for r in conn.execute(sql, params).fetchall()]

    def doc_counts(
        self, conn: Any, words: Sequence[str], known: dict[str, int] | None = None
    ) -> dict[str, int]:
        """How many memories hold each word (a phrase where it has several tokens)."""
        known = {} if known is None else known
        wanted = [w for w in dict.fromkeys(words) if w not in known]
        params: list[Any] = []
        parts = [(w, p) for i, w in enumerate(wanted) if (p := _hits(w, i, params)) is not None]
        if parts:
            sql = " UNION ALL ".join(p for _, p in parts)
            rows = conn.execute(
                f"SELECT term, count(*) FROM ({sql}) h WHERE tf > 0 GROUP BY term", params
            ).fetchall()
            found = {int(r[0]): int(r[1]) for r in rows}
            for i, w in enumerate(wanted):
                known[w] = found.get(i, 0)
        return {w: known[w] for w in words if w in known}

    def matching(self, conn: Any, terms: Sequence[str]) -> int:
        params: list[Any] = []
        parts = [p for i, t in enumerate(terms) if (p := _hits(t, i, params)) is not None]
        if not parts:
            return 0
        sql = f"SELECT count(DISTINCT seq) FROM ({' UNION ALL '.join(parts)}) h WHERE tf > 0"
        row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row else 0

    def size(self, conn: Any) -> int:
        row = conn.execute("SELECT count(*) FROM memory_doclen").fetchone()
        return int(row[0]) if row else 0

    def reset(self, conn: Any) -> None:
        conn.execute("DELETE FROM memory_terms")
        conn.execute("DELETE FROM memory_doclen")
