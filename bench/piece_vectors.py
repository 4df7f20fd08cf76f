"""Would "multi-vector memories" find more? An offline experiment (nothing under src/ changes).

Today a memory has one vector, of its whole text: a long chat message whose third line answers
the ask is embedded as a whole (MiniLM truncates at 256 word pieces), and that line's meaning
is diluted by the others. The idea measured here: embed each memory's *pieces* too and let the
cosine part of the score be the best piece's (``max``), or softer combinations of them.

Pieces (``--variants``, each kind with each combination):

- ``lines``: every non-empty line of the text (chitchat messages join their lines with "\\n");
  ``linesN``: only the lines of at least N words (a short line such as "this is sadie" is
  mostly a name, and a name in the ask matches it);
- ``chunksN``: sentence-ish chunks of at most N words: the text split into lines, lines into
  sentences (after ``.``, ``!``, ``?``), consecutive sentences packed up to N words; a longer
  sentence is cut into N-word windows;

and always the whole text itself, so a memory of one piece scores exactly as today.
Combinations of a memory's piece cosines: ``max``; ``top2`` (the mean of its best two, one
when it has one); ``blendX`` (``(1 - X) x whole + X x max``); ``cand`` (the pieces only find
candidates: the top 40 by best piece join the search, every memory is scored by its whole
text as today); ``reorder`` (the top 10 of ``whole, exact`` kept, reordered as ``max`` ranks
them: recall@10 cannot change, only the order inside the ten).

How it is simulated: each set is stored exactly as ``memory_quality.py`` does (``build``), and
every question is asked through the real ``HierarchicalMemory.search`` with the shipped
``Ranking()``: the same FTS5 candidates, keyword coverage, fusion, time windows and replies.
For a variant, the search's two cosine sources are swapped for piece scores while the search
runs: ``search.vector_side`` returns the union of the index's top 40 (by whole-text cosine)
and the top 40 by piece score (what a piece-level index would return), each with its piece
score, and ``search.exact_cosines`` (the cosine of every other candidate: BM25 hits, time
windows, replies) gives piece scores too. ``whole, exact`` swaps them for the whole-text
cosine computed here: the search as shipped except that its vector candidates also hold the
exact top 40 by cosine (the shipped index is approximate: a sign-bit coarse search, then exact
cosines). Every piece variant has exact candidates too, so it is compared with this row
(``+/-``, ``moved``), which isolates what the pieces change; ``shipped`` is there for
reference.

Per set and split: recall@5, recall@10 and MRR (a question counts at the rank of its first
evidence turn), ``+/-``: questions found in the top 10 that ``whole, exact`` missed / missed
that it found, ``moved``: questions whose rank changed. Then the cost: vectors per memory and
the time to embed the pieces, next to the whole texts' (the same embedder on this machine: a
ratio more than an absolute).

Tune on dev (``--split dev``), report test. A question is 2 points on chitchat (50 dev, 49
test questions).

    python bench/piece_vectors.py [--split dev|test|both] [--sets generated,agent-logs,chitchat]
                                  [--variants lines:max,chunks24:max,...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ember.embedder import get_embedder
from ember.memory import HierarchicalMemory
from ember.memory import search as stages
from ember.memory.retrieval.rank import Ranking
from ember.store.driver import Connection

sys.path.insert(0, str(Path(__file__).parent))
from memory_quality import CachedEmbedder, K, build, ranks, scores
from memory_sets import EvalSet, all_sets

Vec = npt.NDArray[np.float32]
DEPTH = 40
DEFAULT_VARIANTS = (
    "lines:max,lines4:max,chunks12:max,chunks24:max,chunks48:max,lines:top2,chunks24:top2,"
    "lines:blend0.5,chunks24:blend0.5,lines:cand,chunks24:cand,lines:reorder,lines4:reorder,"
    "chunks24:reorder,chunks48:reorder"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def lines(text: str) -> list[str]:
    return [x.strip() for x in text.split("\n") if x.strip()]


def chunks(text: str, n: int) -> list[str]:
    """Sentence-ish chunks of at most ``n`` words (module doc)."""
    out: list[str] = []
    cur: list[str] = []
    for line in lines(text):
        for sentence in _SENTENCE.split(line):
            words = sentence.split()
            while len(words) > n:
                if cur:
                    out.append(" ".join(cur))
                    cur = []
                out.append(" ".join(words[:n]))
                words = words[n:]
            if cur and len(cur) + len(words) > n:
                out.append(" ".join(cur))
                cur = []
            cur += words
    if cur:
        out.append(" ".join(cur))
    return out


def pieces_of(text: str, kind: str) -> list[str]:
    """The pieces of ``text`` other than the whole text itself, each once, in order."""
    if kind == "whole":
        found: list[str] = []
    elif kind.startswith("lines"):
        least = int(kind.removeprefix("lines") or 0)
        found = [x for x in lines(text) if len(x.split()) >= least]
    elif kind.startswith("chunks"):
        found = chunks(text, int(kind.removeprefix("chunks")))
    else:
        raise ValueError(f"unknown piece kind {kind!r}")
    whole = text.strip()
    return [p for p in dict.fromkeys(found) if p != whole]


@dataclass(frozen=True)
class Variant:
    kind: str  # whole, lines, chunksN
    combine: str  # max, top2, blendX

    @property
    def name(self) -> str:
        return "whole, exact" if self.kind == "whole" else f"{self.kind} {self.combine}"


def parse_variants(arg: str) -> list[Variant]:
    out = []
    for item in (x.strip() for x in arg.split(",") if x.strip()):
        kind, _, combine = item.partition(":")
        pieces_of("a", kind)  # raises on an unknown kind
        if not re.fullmatch(r"max|top2|cand|reorder|blend[01](\.\d+)?", combine):
            raise argparse.ArgumentTypeError(f"unknown combination {combine!r}")
        out.append(Variant(kind, combine))
    return out


class PieceEmbedder:
    """Piece vectors by text, each embedded once per run, with the time it took."""

    def __init__(self, emb: CachedEmbedder) -> None:
        self.emb = emb
        self.vectors: dict[str, Vec] = {}

    def embed(self, texts: Sequence[str]) -> float:
        """Embeds the texts not seen yet; the seconds it took."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        t0 = time.perf_counter()
        if missing:
            for t, v in zip(missing, self.emb.inner.embed(missing), strict=True):
                self.vectors[t] = np.asarray(v, dtype=np.float32)
        return time.perf_counter() - t0


class PieceScores:
    """Each memory's score for a query vector under one variant: its whole vector and its
    pieces' in one matrix, and ``slots[row]`` the matrix rows of memory ``row`` (padded with
    an index whose cosine is -inf)."""

    def __init__(self, whole: Vec, pieces: list[list[Vec]], combine: str) -> None:
        rows = [[w, *p] for w, p in zip(whole, pieces, strict=True)]
        width = max(len(r) for r in rows)
        self.matrix = np.stack([v for r in rows for v in r]).astype(np.float32)
        pad = len(self.matrix)
        self.slots = np.full((len(rows), width), pad, dtype=np.int64)
        i = 0
        for row, r in enumerate(rows):
            self.slots[row, : len(r)] = np.arange(i, i + len(r))
            i += len(r)
        self.count = np.array([len(r) for r in rows])
        self.combine = combine
        self._cache: dict[bytes, npt.NDArray[np.float64]] = {}
        self._best: dict[bytes, npt.NDArray[np.float64]] = {}

    def __call__(self, q: Vec) -> npt.NDArray[np.float64]:
        key = q.astype(np.float32).tobytes()
        if key not in self._cache:
            sims = np.append(self.matrix @ q.astype(np.float32), -np.inf)[self.slots]
            whole, best = sims[:, 0], sims.max(axis=1)
            if self.combine == "max":
                out = best
            elif self.combine == "cand":
                out = whole
            elif self.combine == "top2":
                second = -np.sort(-sims, axis=1)[:, 1] if sims.shape[1] > 1 else best
                out = np.where(self.count > 1, (best + second) / 2, best)
            else:
                x = float(self.combine.removeprefix("blend"))
                out = (1 - x) * whole + x * best
            self._cache[key] = out.astype(np.float64)
            self._best[key] = best.astype(np.float64)
        return self._cache[key]

    def candidates(self, q: Vec) -> npt.NDArray[np.float64]:
        """What picks the piece index's candidates: the best piece's cosine (every
        combination but ``cand`` ranks by it too)."""
        self(q)
        return self._best[q.astype(np.float32).tobytes()]


@contextlib.contextmanager
def piece_search(score: PieceScores, row_of: dict[int, int]) -> Iterator[None]:
    """While inside, the store's searches see piece scores instead of whole-text cosines
    (module doc)."""
    seqs = np.array(sorted(row_of), dtype=np.int64)
    seq_rows = np.array([row_of[int(s)] for s in seqs], dtype=np.int64)
    vector_side: Callable[..., dict[int, float]] = stages.vector_side

    def exact(conn: Connection, query: Vec, wanted: Sequence[int], dim: int) -> dict[int, float]:
        s = score(query)
        return {q: float(s[row_of[q]]) for q in wanted if q in row_of}

    def side(conn: Connection, index: Any, qvec: Vec | None, depth: int) -> dict[int, float]:
        base = vector_side(conn, index, qvec, depth)
        if qvec is None:
            return base
        s = score.candidates(qvec)[seq_rows]
        top = np.lexsort((seqs, -s))[:depth]  # best first, ties by seq
        picked = set(base) | {int(seqs[i]) for i in top}
        return exact(conn, qvec, sorted(picked), 0)

    names = ("vector_side", "exact_cosines")
    saved = [getattr(stages, n) for n in names]
    for n, fn in zip(names, (side, exact), strict=True):
        setattr(stages, n, fn)
    try:
        yield
    finally:
        for n, fn in zip(names, saved, strict=True):
            setattr(stages, n, fn)


def seq_rows(store: HierarchicalMemory, turn_of: dict[str, str], es: EvalSet) -> dict[int, int]:
    """Memory seq -> its turn's row in ``es.turns``."""
    row = {t.id: i for i, t in enumerate(es.turns)}
    found = store.database.read(lambda c: c.execute("SELECT seq, id FROM memories").fetchall())
    return {int(seq): row[turn_of[mid]] for seq, mid in found}


def reordered(
    store: HierarchicalMemory, turn_of: dict[str, str], es: EvalSet, r: Ranking,
    exact: PieceScores, by_piece: PieceScores, row_of: dict[int, int],
) -> list[int | None]:  # fmt: skip
    """``reorder``: the top 10 of ``whole, exact``, in the order a ``max`` search ranks them
    (those it does not rank in its top 40 last, in their own order)."""
    out: list[int | None] = []
    for q in es.questions:
        with piece_search(exact, row_of):
            top = [h.memory.id for h in store.search(q.question, top_k=K, fusion=r, now=es.now,
                                                     touch=False)]  # fmt: skip
        with piece_search(by_piece, row_of):
            order = [h.memory.id for h in store.search(q.question, top_k=DEPTH, fusion=r,
                                                       now=es.now, touch=False)]  # fmt: skip
        pos = {m: i for i, m in enumerate(order)}
        ten = sorted(enumerate(top), key=lambda im: (pos.get(im[1], DEPTH), im[0]))
        found = [i for i, (_, m) in enumerate(ten, 1) if turn_of[m] in q.evidence]
        out.append(found[0] if found else None)
    return out


def run_set(
    emb: CachedEmbedder, pe: dict[str, PieceEmbedder], es: EvalSet, variants: list[Variant],
    costs: dict[tuple[str, str], dict[str, Any]],
) -> list[dict[str, Any]]:  # fmt: skip
    texts = [t.text for t in es.turns]
    t0 = time.perf_counter()
    whole = emb.passages(texts)
    took = time.perf_counter() - t0
    costs.setdefault((es.name, "whole"), {"vectors": len(texts), "seconds": took})
    z = emb.cosine_zero
    shipped = Ranking(cosine_zero=z)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = HierarchicalMemory(Path(tmp) / "ember.db", emb)
        turn_of = build(store, es)
        row_of = seq_rows(store, turn_of, es)
        rs = ranks(store, turn_of, es, shipped)
        rows.append({"set": es.name, "split": es.split, "method": "shipped", **scores(rs)})
        base: list[int | None] = []  # whole, exact: what every piece variant is compared with
        for v in [Variant("whole", "max"), *(x for x in variants if x.kind != "whole")]:
            pieces = [pieces_of(t, v.kind) for t in texts]
            flat = [p for ps in pieces for p in ps]
            kind = pe.setdefault(v.kind, PieceEmbedder(emb))  # one cache per kind: fair times
            seconds = kind.embed(flat)
            if (es.name, v.kind) not in costs:
                costs[(es.name, v.kind)] = {"vectors": len(flat), "seconds": seconds,
                                            "multi": sum(1 for ps in pieces if ps)}  # fmt: skip
            vecs = [[kind.vectors[p] for p in ps] for ps in pieces]
            if v.combine == "reorder":
                exact = PieceScores(whole, [[] for _ in texts], "max")
                by_piece = PieceScores(whole, vecs, "max")
                rs = reordered(store, turn_of, es, shipped, exact, by_piece, row_of)
            else:
                with piece_search(PieceScores(whole, vecs, v.combine), row_of):
                    rs = ranks(store, turn_of, es, shipped)
            base = base or rs
            gained = sum(1 for a, b in zip(base, rs, strict=True) if a is None and b is not None)
            lost = sum(1 for a, b in zip(base, rs, strict=True) if a is not None and b is None)
            moved = sum(1 for a, b in zip(base, rs, strict=True) if a != b)
            rows.append({"set": es.name, "split": es.split, "method": v.name, **scores(rs),
                         "gained": gained, "lost": lost, "moved": moved})  # fmt: skip
        store.close()
    print(f"# {es.name}/{es.split}: {len(texts)} memories, {len(es.questions)} questions",
          file=sys.stderr, flush=True)  # fmt: skip
    return rows


def print_tables(rows: list[dict[str, Any]], costs: dict[tuple[str, str], dict[str, Any]]) -> None:
    head = f"{'set':<14}{'split':<6}{'method':<20}{'n':>5}{'R@5':>7}{'R@10':>7}{'MRR':>7}"
    head += f"{'+/-':>8}{'moved':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        base = r["method"] in ("shipped", "whole, exact")
        delta = "" if base else f"+{r['gained']}/-{r['lost']}"
        moved = "" if base else str(r["moved"])
        print(f"{r['set']:<14}{r['split']:<6}{r['method']:<20}{r['n']:>5}{r['r@5']:>7.3f}"
              f"{r['r@10']:>7.3f}{r['mrr']:>7.3f}{delta:>8}{moved:>7}")  # fmt: skip
    print()
    head = f"{'set':<14}{'pieces':<10}{'memories split':>15}"
    head += f"{'vectors':>9}{'/memory':>9}{'embed s':>9}"
    print(head)
    print("-" * len(head))
    for (name, kind), c in sorted(costs.items()):
        n = costs[(name, "whole")]["vectors"]
        total = c["vectors"] + (n if kind != "whole" else 0)
        split = f"{c.get('multi', 0)}" if kind != "whole" else ""
        print(f"{name:<14}{kind:<10}{split:>15}{total:>9}{total / n:>9.2f}{c['seconds']:>9.1f}")
    print("(vectors: the whole texts' plus the pieces'; embed s: the pieces' alone; "
          "memories split: those with a piece other than their whole text)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "both"), default="both")
    ap.add_argument("--sets", help="comma-separated set names (default: all available)")
    ap.add_argument(
        "--variants",
        type=parse_variants,
        default=parse_variants(DEFAULT_VARIANTS),
        help=f"kind:combination, comma-separated (default {DEFAULT_VARIANTS})",
    )
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"  # as memory_quality.py: the sets' days are UTC days
    time.tzset()
    emb = CachedEmbedder(get_embedder())
    emb.inner.embed(["warm up: the model loads before anything is timed"])
    pe: dict[str, PieceEmbedder] = {}
    rows: list[dict[str, Any]] = []
    costs: dict[tuple[str, str], dict[str, Any]] = {}
    for split in ("dev", "test") if args.split == "both" else (args.split,):
        sets = all_sets(split)
        wanted = set(args.sets.split(",")) if args.sets else {x.name for x in sets}
        for es in (x for x in sets if x.name in wanted):
            rows += run_set(emb, pe, es, args.variants, costs)
    print_tables(rows, costs)


if __name__ == "__main__":
    main()
