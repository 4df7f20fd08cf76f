"""Retrieval quality: is the turn that holds the answer in the top 10?

Loads the multi-session conversation set (``bench/data/memory_conversations.json``, written by
``bench/memory_data.py``), stores every turn as a memory of one project (timestamped by its
session's day) with the real embedder, then asks each question four ways, side by side in one
run: hybrid (the score mix ember ships), hybrid by reciprocal rank fusion, vector only and BM25
only. The mix weight was chosen on ``conversation_set(seed=2027)``; this run uses the committed
set (seed 2026). Reported: evidence in top-10 and top-1 and mean reciprocal rank, per question
type, with the ratio to the shipped method; "now" is the day after the last session.

Three recency settings: as shipped (a bounded boost), none, and the unbounded
``relevance x exp(-age/30)``. The set has no outdated facts for recency to demote, so here
recency can only cost recall; the runs show how much.

    python bench/memory_quality.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ember.memory import HierarchicalMemory, NewMemory
from ember.memory.embed import get_embedder
from ember.memory.retrieval import rank

sys.path.insert(0, str(Path(__file__).parent))
from memory_data import DATA, conversation_set

DAY = 86400.0
START = 1_780_000_000.0
METHODS = (("hybrid (mix)", "mix"), ("hybrid (rrf)", "rrf"), ("vector only", "vector"),
           ("bm25 only", "bm25"))  # fmt: skip


def load() -> dict[str, Any]:
    if DATA.exists():
        data: dict[str, Any] = json.loads(DATA.read_text())
        return data
    return conversation_set()


def build(store: HierarchicalMemory, turns: list[dict[str, Any]]) -> dict[str, str]:
    items = [
        NewMemory(
            t["text"],
            created_at=START + t["session"] * DAY + i * 30,
            metadata={"turn": t["id"]},
            session_id=None,
        )
        for i, t in enumerate(turns)
    ]
    out = store.add_many(items, dedup=False)
    return {m.id: str(m.metadata["turn"]) for m in out}


def evaluate(
    store: HierarchicalMemory,
    turn_of: dict[str, str],
    questions: list[dict[str, Any]],
    fusion: str,
    now: float,
) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for q in questions:
        hits = store.search(q["question"], top_k=10, fusion=fusion, now=now, touch=False)  # type: ignore[arg-type]
        ranked = [turn_of[h.memory.id] for h in hits]
        rank = ranked.index(q["evidence"]) + 1 if q["evidence"] in ranked else None
        for group in ("all", q["match"]):
            s = stats.setdefault(group, {"n": 0, "top10": 0, "top1": 0, "mrr": 0.0})
            s["n"] += 1
            s["top10"] += rank is not None
            s["top1"] += rank == 1
            s["mrr"] += 1.0 / rank if rank else 0.0
    return stats


def table(title: str, results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    groups = ["all", "both", "keyword", "meaning"]
    head = f"{'method':<14}" + "".join(f"{'top-10 ' + g:>18}" for g in groups)
    head += f"{'top-1':>8}{'MRR':>7}{'ratio':>8}"
    print(head)
    print("-" * len(head))
    base = results[METHODS[0][0]]["all"]["top10"]
    for name, _ in METHODS:
        r = results[name]
        cells = ""
        for g in groups:
            s = r.get(g, {"n": 0, "top10": 0})
            cells += f"{int(s['top10']):>9}/{int(s['n']):<3} {s['top10'] / max(s['n'], 1):>4.0%}"
        a = r["all"]
        ratio = a["top10"] / base if base else 0.0
        print(f"{name:<14}{cells}{a['top1'] / a['n']:>8.0%}{a['mrr'] / a['n']:>7.3f}{ratio:>8.2f}")


def main() -> None:
    data = load()
    turns, questions = data["turns"], data["questions"]
    embedder = get_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        store = HierarchicalMemory(Path(tmp) / "ember.db", embedder)
        t0 = time.perf_counter()
        turn_of = build(store, turns)
        took = time.perf_counter() - t0
        print(
            f"{len(turns)} turns in {1 + max(t['session'] for t in turns)} sessions stored in "
            f"{took:.1f}s ({store.index_name}, {embedder.name}); {len(questions)} questions"
        )
        end = START + (1 + max(t["session"] for t in turns)) * DAY
        shipped = rank.RECENCY_WEIGHT
        runs = (
            (f"as shipped (recency weight {shipped})", shipped),
            ("relevance only (recency weight 0)", 0.0),
            ("unbounded recency: relevance x exp(-age/30) (weight 1)", 1.0),
        )
        for title, weight in runs:
            rank.RECENCY_WEIGHT = weight
            results = {name: evaluate(store, turn_of, questions, f, end) for name, f in METHODS}
            table(title, results)
        rank.RECENCY_WEIGHT = shipped
        store.close()


if __name__ == "__main__":
    main()
