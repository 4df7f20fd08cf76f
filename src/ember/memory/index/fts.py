"""The FTS5 text index (BM25 ranking, porter stemming) over current memories."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ember.store.driver import Connection

_WORD = re.compile(r"\w+", re.UNICODE)
#: Words too common to say anything about which memory is meant; matching them only adds noise
#: (every memory "uses" something) and cost (an OR over them scans most of the index).
_STOP = """a about after all also am an and any are as at be because been before being but by can
    could did do does doing done for from had has have having he her here him his how i if in
    into is it its just let me more most my no nor not now of off on once only or other our out
    over own please same she should so some such than that the their them then there these
    they this those through to too under until up us very was we were what when where which
    while who whom why will with would you your yours"""
STOPWORDS = frozenset(_STOP.split())
MAX_TERMS = 32
#: The most matches one candidate query scores (``FtsIndex.search``). FTS5 computes ``bm25()``
#: for every memory that holds any term of the OR before it can sort, ~1 us each: an ask made
#: of words every tenth memory holds scored ~35,000 rows and took ~30 ms at 100k memories.
#: A store whose ask matches fewer rows (every small store) is searched exactly as before.
POSTINGS_BUDGET = 20_000


def query_terms(texts: Sequence[str], max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct, lower-cased, non-stopword terms, in the order given (first text first).

    The caller lists its texts by priority (the user's words first), so the cap keeps the
    terms that matter: an OR of hundreds of terms from a pasted log would match everything.
    """
    seen: dict[str, None] = {}
    for text in texts:
        for m in _WORD.finditer(text.lower()):
            word = m.group()
            if word in STOPWORDS or (len(word) < 2 and word.isascii()) or word in seen:
                continue
            seen[word] = None
            if len(seen) >= max_terms:
                return list(seen)
    return list(seen)


def match_expression(terms: Sequence[str]) -> str | None:
    """An FTS5 MATCH string: each term quoted (so no input can be FTS5 syntax), OR-ed."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms if t]
    return " OR ".join(quoted) if quoted else None


class FtsIndex:
    """Stateless: every call names the connection (the writer's inside a write, a reader's
    for ``search``). ``postings_budget`` bounds the rows one search scores (0: no bound)."""

    def __init__(self, postings_budget: int = POSTINGS_BUDGET) -> None:
        self.postings_budget = postings_budget

    def add(self, conn: Connection, seqs: Sequence[int], contents: Sequence[str]) -> None:
        self.remove(conn, seqs)
        conn.executemany(
            "INSERT INTO memory_fts (rowid, content) VALUES (?, ?)",
            list(zip(seqs, contents, strict=True)),
        )

    def remove(self, conn: Connection, seqs: Sequence[int]) -> None:
        conn.executemany("DELETE FROM memory_fts WHERE rowid=?", [(s,) for s in seqs])

    def search(
        self,
        conn: Connection,
        terms: Sequence[str],
        k: int,
        counts: dict[str, int] | None = None,
        *,
        common: bool = False,
    ) -> list[tuple[int, float]]:
        """Up to ``k`` (seq, BM25) pairs, best first (higher is better), ties by seq.

        Terms held by more than half of the memories are left out (``bounded``) unless
        ``common`` (a search with no vector side: nothing else would find a memory holding
        only such words). When the OR of the rest matches more memories than the postings
        budget, the most common terms are left out of it, rarest kept first (at least one
        that some memory holds): they weigh least in BM25, and a memory holding only common
        words of the ask is found by its meaning, if at all. The keyword share that ranks hits
        (``lexical.py``) still counts every term. ``counts``: document counts already taken
        (``doc_counts``), shared with the caller.
        """
        return self.rank(conn, self.bounded(conn, terms, counts, common=common), k)

    def bounded(
        self,
        conn: Connection,
        terms: Sequence[str],
        counts: dict[str, int] | None = None,
        *,
        common: bool = False,
    ) -> list[str]:
        """``terms`` without those that cannot change which memories rank first: the ones no
        memory holds, the ones held by more than half of the memories (unless ``common``),
        and, when the OR of the rest matches more rows than the budget allows, the most common
        ones (see ``search``); the rarest term some memory holds always stays.

        FTS5's BM25 clamps the IDF of a term held by more than half the rows at 1e-6, so such
        a term (the project's own name in every fact, a word every numbered ask shares) adds
        nothing to any score, yet it made FTS5 score every row that holds it: all 1,000 of a
        store whose every fact said "ticket" (~1 ms a search, and 40 candidates chosen by
        nothing but length). A term no memory holds matches nothing: kept as "the rarest" in
        place of the held ones, it left a one-fact store's only fact out of the candidates of
        every ask that also held a word the fact lacks ("which database does staging use?").
        A budget of 0 leaves every term in (the reference a benchmark compares with)."""
        budget = self.postings_budget
        if len(terms) < 2 or budget <= 0:
            return list(terms)
        df = self.doc_counts(conn, terms, counts)
        half = self.size(conn) / 2
        rarest_first = sorted(terms, key=lambda t: (df.get(t, 0), t))
        held = [t for t in rarest_first if df.get(t, 0) > 0]
        if not held:
            return rarest_first[:1]  # nothing matches either way: one term, one cheap lookup
        kept = [t for t in held if common or df[t] <= half] or held[:1]
        if sum(df.get(t, 0) for t in kept) <= budget:
            return [t for t in terms if t in kept]  # the caller's order
        if self.matching(conn, kept) <= budget:
            return [t for t in terms if t in kept]
        within: set[str] = set()
        total = 0
        for term in kept:
            if within and total + df.get(term, 0) > budget:
                break
            within.add(term)
            total += df.get(term, 0)
        return [t for t in terms if t in within]

    def matching(self, conn: Connection, terms: Sequence[str]) -> int:
        """How many memories hold any of ``terms`` (what the OR of them scores)."""
        expr = match_expression(terms)
        return 0 if expr is None else self._count(conn, expr)

    def _count(self, conn: Connection, expr: str) -> int:
        row = conn.execute(
            "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?", (expr,)
        ).fetchone()
        return int(row[0]) if row else 0

    def rank(
        self,
        conn: Connection,
        terms: Sequence[str],
        k: int | None,
        between: tuple[int, int] | None = None,
    ) -> list[tuple[int, float]]:
        """Up to ``k`` (every one when None) (seq, BM25) pairs for the OR of all ``terms``,
        unbounded, best first; only among seqs ``between`` (first, last) when given. BM25 is
        scored on the whole index's statistics either way, so the pairs merge.

        A rowid range, not a list: FTS5 seeks a range in its postings, but runs the whole
        query once per rowid of an ``IN`` list (+70 ms for a week of a 10k store)."""
        expr = match_expression(terms)
        if expr is None or (between is not None and between[0] > between[1]):
            return []
        sql = "SELECT rowid, -bm25(memory_fts) AS s FROM memory_fts WHERE memory_fts MATCH ?"
        params: list[object] = [expr]
        if between is not None:
            sql += " AND rowid BETWEEN ? AND ?"
            params += between
        sql += " ORDER BY s DESC, rowid"
        if k is not None:
            sql += " LIMIT ?"
            params.append(k)
        return [(int(r[0]), float(r[1])) for r in conn.execute(sql, params).fetchall()]

    def doc_counts(
        self, conn: Connection, words: Sequence[str], known: dict[str, int] | None = None
    ) -> dict[str, int]:
        """How many memories hold each word (stemmed by the index itself, as search does).

        ``known`` holds counts already taken in this snapshot and receives the new ones: the
        candidate query and the keyword share ask about mostly the same words, and each
        count is a scan of the word's postings (~2 ms for an ask's words at 100k)."""
        known = {} if known is None else known
        out: dict[str, int] = {}
        for word in words:
            if word not in known:
                expr = match_expression([word])
                if expr is None:
                    continue
                known[word] = self._count(conn, expr)
            out[word] = known[word]
        return out

    def size(self, conn: Connection) -> int:
        """The number of indexed memories (from FTS5's per-row size table: no text read)."""
        row = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
        return int(row[0]) if row else 0

    def reset(self, conn: Connection) -> None:
        conn.execute("DELETE FROM memory_fts")
