"""``ember store copy`` timed: an ember home with N memories (with vectors) to PostgreSQL, again
(nothing new), a second developer's home of the same project into that store in use (a
merge: every row renumbered), and the store back into a fresh home.

For each size in ``--sizes``: one project of N ~10-word facts (``memory_data.short_memories``)
with 384-dimension unit vectors (seeded random: the copy moves bytes, it never embeds) and N
accounting rows, written through ``HierarchicalMemory`` as the proxy would; then, against a
throwaway PostgreSQL 16 with pgvector (``ember.testing.postgres``, on a unix socket):

* home -> PostgreSQL (rows COPYed in batches, keyword postings rebuilt, HNSW built once);
* the same again (every row found already there, nothing written);
* a second home of the same project -> the same store (its numbers all taken: each row
  gets a new one, its vectors follow it, the keyword postings and HNSW graph grow);
* PostgreSQL -> a fresh home (FTS5 and sqlite-vec rebuilt from the rows of both homes).

Prints seconds and memories per second per step, and checks the counts of each step.

    python bench/store_copy.py [--sizes 10000]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))

from ember.compose import spec
from ember.memory import HierarchicalMemory, NewMemory
from ember.project import project_dir_name
from ember.store.accounting import ExchangeRecord
from ember.store.copy import CopyReport, copy_store, parse
from ember.store.database import Database
from ember.store.schema import PROJECT
from ember.testing.postgres import postgres_server
from memory_data import short_memories


class SeededEmbedder:
    """Unit vectors seeded by each text's digest: the same text, the same vector."""

    name = "bench:seeded"
    dim = 384

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def make_home(home: Path, n: int, second: bool = False) -> Path:
    """One developer's home: N exchanges and N memories (``second``: another developer's,
    the same project, other times and facts under the same numbers)."""
    path = home / "projects" / project_dir_name("/src/bench", is_path=True) / "ember.db"
    shift = 0.5 if second else 0.0
    db = Database(path, PROJECT, log_failures=False)
    try:
        rows = [
            ExchangeRecord(1.79e9 + i + shift, f"s{i % 50}", "/src/bench", "anthropic", "m", 200,
                           "ok", False, None, 0.001, "p", 100.0, None).row()
            for i in range(n)
        ]  # fmt: skip
        db.write(
            lambda c: c.executemany(
                "INSERT INTO exchanges (ts, session_id, project, protocol, model, status, "
                "outcome, stream, input_tokens, cache_read_tokens, cache_write_tokens, "
                "cache_write_1h_tokens, output_tokens, usage_known, cost_usd, price_snapshot, "
                "latency_ms, ttfb_ms, thread, thread_kind, origin, error_type, usage_estimated, "
                "notes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
        )
    finally:
        db.close()
    store = HierarchicalMemory(path, SeededEmbedder())
    try:
        facts = [("their " if second else "") + f for f in short_memories(n)]
        for start in range(0, n, 1000):
            chunk = facts[start : start + 1000]
            store.add_many([NewMemory(f, category="fact") for f in chunk], dedup=False)
        assert store.count() == n, store.count()
    finally:
        store.close()
    return path


def timed(src: str, dst: str) -> tuple[float, CopyReport]:
    started = time.perf_counter()
    report = copy_store(parse(src), parse(dst), features=spec().features)
    seconds = time.perf_counter() - started
    assert report.ok, "\n".join(report.lines())
    return seconds, report


def memories(report: CopyReport) -> tuple[int, int]:
    """(copied, already there) of the ``memories`` table."""
    for unit in report.units:
        for t in unit.tables:
            if t.table == "memories":
                return t.copied, t.already
    return 0, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    head = f"{'memories':>9} {'step':<22} {'seconds':>8} {'memories/s':>11}"
    print(f"{head} {'copied':>8} {'already':>8}")
    with postgres_server() as server:
        for n in sizes:
            with tempfile.TemporaryDirectory() as tmp, server.fresh_database() as url:
                home, other = Path(tmp) / "home", Path(tmp) / "other"
                make_home(home, n)
                make_home(other, n, second=True)
                steps = [
                    ("home -> postgres", str(home), url, n),
                    ("again (nothing new)", str(home), url, n),
                    ("2nd home -> in use", str(other), url, n),
                    ("postgres -> new home", url, str(Path(tmp) / "back"), 2 * n),
                ]
                for label, src, dst, rows in steps:
                    seconds, report = timed(src, dst)
                    copied, already = memories(report)
                    assert copied + already == rows, (copied, already)
                    print(
                        f"{n:>9} {label:<22} {seconds:>8.2f} {rows / seconds:>11.0f} "
                        f"{copied:>8} {already:>8}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
