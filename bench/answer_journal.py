"""What the answer journal costs, against the alternative it was chosen over.

A ``kill -9`` loses the accounting rows queued after the writer's last commit; the next start
can only say how many if something durable named the answers first. Two ways, measured here
side by side on this machine's disk:

1. **Journal an answer** (``store.journal``): one ``os.write`` of a line before the answer's last
   byte, one retire when its row is written — what each answer costs the proxy, with and
   without an ``fsync`` per answer (the journal fsyncs once a second instead), what that
   once-a-second ``fsync`` takes on its worker thread, and what the ``send`` that watches for
   the last message (``ExchangeFlow.announcing``) adds to each message of an answer.
2. **Commit the row before the last byte**: how long an answer would wait for its own row's
   commit (``Database.submit`` to committed, one row at a time, the writer otherwise idle) —
   added to every answer's end.

Every loop is bounded by ``--answers``; nothing leaves the temporary folder.

    python bench/answer_journal.py [--answers 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

# An entry point: the composition root installs the features' settings and tables.
import ember.compose  # noqa: F401
from ember.protocols.base import Usage
from ember.store.accounting import ExchangeRecord
from ember.store.database import Database
from ember.store.journal import AnswerJournal
from ember.store.schema import PROJECT


def _timed(n: int, one: Callable[[int], None]) -> list[float]:
    """Microseconds per call of ``one(i)``, ``n`` calls."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        one(i)
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def _row(
    label: str, us: list[float], unit: str = "us", scale: float = 1.0
) -> tuple[str, str, str, str]:
    us = sorted(v / scale for v in us)
    p = lambda q: us[min(len(us) - 1, int(q * len(us)))]  # noqa: E731
    return label, f"{statistics.fmean(us):.2f} {unit}", f"{p(0.5):.2f}", f"{p(0.99):.2f}"


def journal_rows(folder: Path, n: int) -> list[tuple[str, str, str, str]]:
    db = folder / "projects" / "p" / "ember.db"
    journal = AnswerJournal(folder / "journal")
    session = "0f0f0f0f-0000-4000-8000-00000000abcd"
    ts0 = time.time()

    def answer(i: int) -> None:
        journal.retire(journal.answered(ts0 + i / 1000, session, db))

    plain = _timed(n, answer)
    synced_journal = AnswerJournal(folder / "journal-synced")

    def answer_synced(i: int) -> None:
        segment = synced_journal.answered(ts0 + i / 1000, session, db)
        synced_journal.sync()
        synced_journal.retire(segment)

    synced = _timed(min(n, 2000), answer_synced)
    # the once-a-second fsync, after a second's worth of answers (a few hundred)
    per_second = []
    for round_ in range(50):
        for i in range(300):
            journal.retire(journal.answered(ts0 + round_ + i / 1000, session, db))
        t0 = time.perf_counter()
        journal.sync()
        per_second.append((time.perf_counter() - t0) * 1e6)
    journal.close()
    synced_journal.close()
    return [
        _row("journal an answer, then retire it", plain),
        _row("... with an fsync per answer", synced),
        _row("the journal's fsync, once a second", per_second),
    ]


def wrapper_rows(n: int) -> list[tuple[str, str, str, str]]:
    """What ``ExchangeFlow.announcing`` adds to each message sent to a client."""
    from ember.proxy.flow import ExchangeFlow

    class _Pipeline:
        def answered(self, ex: object) -> None:
            return None

    async def plain(message: dict[str, object]) -> None:
        return None

    flow = ExchangeFlow.__new__(ExchangeFlow)
    flow.pipeline = _Pipeline()  # type: ignore[assignment]
    wrapped = flow.announcing(None, plain)  # type: ignore[arg-type]
    chunk: dict[str, object] = {"type": "http.response.body", "body": b"x", "more_body": True}

    async def run(send: Callable[[dict[str, object]], Awaitable[None]]) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await send(chunk)
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    base, told = asyncio.run(run(plain)), asyncio.run(run(wrapped))
    extra = [t - b for t, b in zip(sorted(told), sorted(base), strict=True)]
    return [_row("announcing send, per message (added)", extra)]


def commit_rows(folder: Path, n: int) -> list[tuple[str, str, str, str]]:
    db = Database(folder / "commit" / "ember.db", PROJECT)
    usage = Usage(input_tokens=1200, output_tokens=300)

    def commit(i: int) -> None:
        rec = ExchangeRecord(
            float(i), "s", "/p", "anthropic", "m", 200, "ok", True,
            usage, 0.001, "snap", 1.0, 0.5,
        )  # fmt: skip
        db.submit(rec.insert, label="accounting").result()

    db.write(lambda c: None)  # opened and migrated before the clock starts
    waits = _timed(min(n, 2000), commit)
    db.close()
    return [_row("wait for the row's own commit", waits, "ms", 1000.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-journal-bench-") as tmp:
        rows = journal_rows(Path(tmp), args.answers) + wrapper_rows(args.answers)
        rows += commit_rows(Path(tmp), args.answers)
    print(f"{args.answers} answers (fsync'd and committed legs: at most 2000); pid {os.getpid()}")
    print(f"{'per answer':<40} {'mean':>12} {'p50':>8} {'p99':>8}")
    for label, mean, p50, p99 in rows:
        print(f"{label:<40} {mean:>12} {p50:>8} {p99:>8}")


if __name__ == "__main__":
    main()
