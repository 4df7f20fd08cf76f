"""The keyword index on PostgreSQL, scoring exactly as FTS5 does.

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
    dl INTEGER NOT NULL,
    pos INTEGER[] NOT NULL,
    PRIMARY KEY (stem, seq) INCLUDE (tf, dl)
);
CREATE INDEX memory_terms_seq ON memory_terms (seq);
CREATE TABLE memory_doclen (seq BIGINT PRIMARY KEY, len INTEGER NOT NULL);
CREATE TABLE memory_text_stats (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    docs BIGINT NOT NULL, tokens BIGINT NOT NULL);
INSERT INTO memory_text_stats (docs, tokens) VALUES (0, 0);
"""
_K1, _B = 1.2, 0.75


def postings(text: str) -> tuple[int, dict[str, list[int]]]:
    """The token count of ``text`` and each stem's positions, as FTS5 indexes them."""
    where: dict[str, list[int]] = defaultdict(list)
    toks = tokens(text)
    for i, (_, stem) in enumerate(toks):
        where[stem].append(i)
    return len(toks), dict(where)


def _terms_sql(terms: Sequence[str], params: list[Any]) -> str | None:
    """A ``SELECT term, seq, tf, dl`` of every memory holding each of ``terms`` (``term``: the
    term's index): single tokens read straight off the (stem, seq) index, a term of several
    tokens as a phrase (each next token at the next position). None when no term has a
    token."""
    singles: list[tuple[int, str]] = []
    parts: list[str] = []
    for tag, term in enumerate(terms):
        stems = [st for _, st in tokens(term)]
        if len(stems) == 1:
            singles.append((tag, stems[0]))
        elif stems:
            parts.append(_phrase(tag, stems, params))
    if singles:
        params += [[t for t, _ in singles], [st for _, st in singles]]
        parts.append(
            "SELECT q.term, t.seq, t.tf, t.dl FROM unnest(?::int[], ?::text[]) AS q(term, stem)"
            " JOIN memory_terms t ON t.stem = q.stem"
        )
    return " UNION ALL ".join(parts) if parts else None


def _phrase(tag: int, stems: list[str], params: list[Any]) -> str:
    joins = "".join(
        f" JOIN memory_terms t{i} ON t{i}.seq = t0.seq AND t{i}.stem = ?"
        for i in range(1, len(stems))
    )
    near = " AND ".join(f"p + {i} = ANY(t{i}.pos)" for i in range(1, len(stems)))
    params += [tag, *stems[1:], stems[0]]
    return (
        "SELECT * FROM (SELECT ?::int AS term, t0.seq, (SELECT count(*) FROM unnest(t0.pos) AS p "
        f"WHERE {near})::int AS tf, t0.dl FROM memory_terms t0{joins} WHERE t0.stem = ?) ph "
        "WHERE tf > 0"
    )


class PgTextIndex(FtsIndex):
    """``FtsIndex`` on PostgreSQL: the same calls, candidates and BM25 numbers. Stateless, like
    it: every call names the connection (a ``store.pg.connection.PgConnection``). The
    collection's size and token count are kept in one row beside the postings (BM25 reads
    them on every search; averaging the lengths took a millisecond at 10k)."""

    def __init__(self, postings_budget: int = POSTINGS_BUDGET) -> None:
        super().__init__(postings_budget)

    def add(self, conn: Any, seqs: Sequence[int], contents: Sequence[str]) -> None:
        self.remove(conn, seqs)
        terms, lengths = [], []
        for seq, content in zip(seqs, contents, strict=True):
            length, where = postings(content)
            lengths.append((seq, length))
            terms += [(stem, seq, len(pos), length, pos) for stem, pos in where.items()]
        if not lengths:
            return
        conn.executemany("INSERT INTO memory_doclen (seq, len) VALUES (?, ?)", lengths)
        if terms:
            conn.executemany(
                "INSERT INTO memory_terms (stem, seq, tf, dl, pos) VALUES (?, ?, ?, ?, ?)", terms
            )
        conn.execute(
            "UPDATE memory_text_stats SET docs = docs + ?, tokens = tokens + ?",
            (len(lengths), sum(n for _, n in lengths)),
        )

    def remove(self, conn: Any, seqs: Sequence[int]) -> None:
        if not seqs:
            return
        ids = list(seqs)
        gone = conn.execute(
            "DELETE FROM memory_doclen WHERE seq = ANY(?) RETURNING len", (ids,)
        ).fetchall()
        if gone:
            conn.execute("DELETE FROM memory_terms WHERE seq = ANY(?)", (ids,))
            conn.execute(
                "UPDATE memory_text_stats SET docs = docs - ?, tokens = tokens - ?",
                (len(gone), sum(int(r[0]) for r in gone)),
            )

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
        hits = _terms_sql(terms, params)
        if hits is None:
            return []
        sql = (
            f"WITH hits AS ({hits}), "
            "df AS (SELECT term, count(*)::float8 AS n FROM hits GROUP BY term) "
            # float8 throughout: a bare 1.2 is numeric in PostgreSQL, several times slower
            "SELECT h.seq, sum(greatest(ln((s.docs - df.n + 0.5::float8) / (df.n + 0.5::float8)),"
            f" 1e-6::float8) * h.tf * {_K1 + 1}::float8 / (h.tf + {_K1}::float8 * "
            f"({1 - _B}::float8 + {_B}::float8 * h.dl / (s.tokens::float8 / s.docs)))) AS score "
            "FROM hits h JOIN df USING (term) CROSS JOIN memory_text_stats s"
        )
        if between is not None:
            sql += " WHERE h.seq BETWEEN ? AND ?"
            params += between
        sql += " GROUP BY h.seq ORDER BY score DESC, h.seq"
        if k is not None:
            sql += " LIMIT ?"
            params.append(k)
        return [(int(r[0]), float(r[1])) for r in conn.execute(sql, params).fetchall()]

    def matching(self, conn: Any, terms: Sequence[str]) -> int:
        params: list[Any] = []
        hits = _terms_sql(terms, params)
        if hits is None:
            return 0
        row = conn.execute(f"SELECT count(DISTINCT seq) FROM ({hits}) h", params).fetchone()
        return int(row[0]) if row else 0

    def doc_counts(
        self, conn: Any, words: Sequence[str], known: dict[str, int] | None = None
    ) -> dict[str, int]:
        """How many memories hold each word (a phrase where it has several tokens)."""
        known = {} if known is None else known
        wanted = [w for w in dict.fromkeys(words) if w not in known]
        params: list[Any] = []
        hits = _terms_sql(wanted, params)
        if hits is not None:
            rows = conn.execute(
                f"SELECT term, count(*) FROM ({hits}) h GROUP BY term", params
            ).fetchall()
            found = {int(r[0]): int(r[1]) for r in rows}
            for i, w in enumerate(wanted):
                if tokens(w):
                    known[w] = found.get(i, 0)
        return {w: known[w] for w in words if w in known}

    def size(self, conn: Any) -> int:
        row = conn.execute("SELECT docs FROM memory_text_stats").fetchone()
        return int(row[0]) if row else 0

    def reset(self, conn: Any) -> None:
        conn.execute("DELETE FROM memory_terms")
        conn.execute("DELETE FROM memory_doclen")
        conn.execute("UPDATE memory_text_stats SET docs = 0, tokens = 0")
