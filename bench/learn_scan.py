"""How fast ``ember learn`` scans Claude Code logs, and how much memory it holds doing it.

Generates ``--mb`` megabytes (default 200) of Claude Code session JSONL into a temporary
directory: sessions of a few MB each, with the record mix of real logs — user prompts, API
messages split over several lines sharing ``message.id`` (thinking, text, tool_use), tool
results from a few hundred bytes to 40 KB, attachments, and some loops (a failing read repeated,
a grep re-run with a bigger ``head``). Then, in a fresh child process each:

- ``parse``: read every line and ``orjson.loads`` it, nothing else (the floor: I/O + JSON);
- ``scan``: ``ember learn``'s whole offline path — discovery, the Claude reader, loop
  detection per session and the digest under its 80k-token budget (``pipeline.fold`` + build);
- ``verbosity``: ``ember learn --verbosity``'s path — the same reader, each session's messages
  folded into the verbosity signals and the baseline (``shaping.from_logs.verbosity_of``).

Reports MB/s and the child's peak RSS (``ru_maxrss``) next to its RSS after imports, so the
memory the scan itself added is visible. Goal: >= 20 MB/s and a peak under 200 MB.

    python bench/learn_scan.py [--mb 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

SESSION_MB = 4


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _session(rng: random.Random, sid: str, target: int) -> bytes:
    """One session's JSONL, about ``target`` bytes."""
    out: list[bytes] = []
    size = 0
    turn = 0
    base = {"sessionId": sid, "cwd": "/work/app", "version": "2.1.90", "gitBranch": "main"}
    while size < target:
        turn += 1
        mid = f"msg_{sid}_{turn}"
        usage = {"input_tokens": 12, "output_tokens": 300, "cache_read_input_tokens": 40_000}
        if turn % 7 == 0:
            command = "cat src/setings.py"
        elif turn % 11 == 0:
            command = f"grep -rn TODO src | head -{rng.choice((50, 100, 200))}"
        else:
            command = f"rg -n symbol_{rng.randrange(10_000)} src/pkg_{rng.randrange(50)}"
        failed = command.startswith("cat src/setings")
        output = "cat: src/setings.py: No such file" if failed else "x" * rng.randrange(100, 12_000)
        records = [
            {
                **base,
                "type": "user",
                "uuid": f"u{turn}",
                "message": {
                    "role": "user",
                    "content": f"step {turn}: look at the failing test in module {turn % 13}",
                },
            },
            {**base, "type": "attachment", "attachment": {"type": "todo", "content": []}},
            {
                **base,
                "type": "assistant",
                "requestId": f"r{turn}",
                "message": {
                    "id": mid,
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "usage": usage,
                    "content": [{"type": "thinking", "thinking": "t" * rng.randrange(200, 3_000)}],
                },
            },
            {
                **base,
                "type": "assistant",
                "requestId": f"r{turn}",
                "message": {
                    "id": mid,
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "usage": usage,
                    "content": [{"type": "text", "text": "Let me look." * rng.randrange(1, 30)}],
                },
            },
            {
                **base,
                "type": "assistant",
                "requestId": f"r{turn}",
                "message": {
                    "id": mid,
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "usage": usage,
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{turn}",
                            "name": "Bash",
                            "input": {"command": command, "description": "search"},
                        }
                    ],
                },
            },
            {
                **base,
                "type": "user",
                "uuid": f"r{turn}",
                "toolUseResult": {"stdout": output[:200]},
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{turn}",
                            "content": output,
                            "is_error": failed,
                        }
                    ],
                },
            },
        ]
        for record in records:
            line = _line(record)
            out.append(line)
            size += len(line)
    return b"".join(out)


def generate(folder: Path, megabytes: int, seed: int = 11) -> int:
    """Write ``megabytes`` of sessions under ``folder``; the bytes written."""
    rng = random.Random(seed)
    project = folder / "-work-app"
    project.mkdir(parents=True, exist_ok=True)
    total, i = 0, 0
    while total < megabytes * 1_000_000:
        data = _session(rng, f"s{i:04d}", SESSION_MB * 1_000_000)
        (project / f"s{i:04d}.jsonl").write_bytes(data)
        total += len(data)
        i += 1
    return total


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(mode: str, folder: Path) -> None:
    """Run one measurement in this (fresh) process and print it as JSON."""
    from ember.learn.digest import DigestBuilder  # noqa: F401  (imports count as baseline)
    from ember.learn.logs import Scan, readers, sources
    from ember.learn.logs.discovery import scan
    from ember.learn.pipeline import analyse, fold
    from ember.shaping.from_logs import verbosity_of

    baseline = _rss_mb()
    start = time.perf_counter()
    if mode == "parse":
        size = 0
        for path in sorted(folder.rglob("*.jsonl")):
            with path.open("rb") as f:
                for raw in f:
                    size += len(raw)
                    orjson.loads(raw)
        extra: dict[str, Any] = {}
    elif mode == "verbosity":
        available = readers()
        found = Scan(sources(available, ["claude"], Path.home(), [folder]))
        run = verbosity_of(scan(available, found), None)
        size = found.stats.bytes
        extra = {
            "sessions": found.sessions,
            "answers": run.report.baseline_answers,
            "new_asks": run.report.signals.new_asks,
        }
    else:
        available = readers()
        found = Scan(sources(available, ["claude"], Path.home(), [folder]))
        builder = fold(available, found)
        result = analyse(builder, found, None)
        size = found.stats.bytes
        extra = {
            "sessions": found.sessions,
            "loops": len(result.loops),
            "digest_tokens": result.digest.tokens,
        }
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "bytes": size,
                "seconds": seconds,
                "baseline_mb": baseline,
                "peak_mb": _rss_mb(),
                **extra,
            }
        )
    )


def measure(mode: str, folder: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(folder)],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="megabytes of logs to generate")
    parser.add_argument("--keep", type=Path, default=None, help="generate here and keep it")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ember-learn-bench-"))
    try:
        start = time.perf_counter()
        written = generate(folder, args.mb)
        print(f"generated {written / 1e6:.0f} MB in {time.perf_counter() - start:.1f} s")
        print(
            f"{'pass':<7} {'MB':>6} {'s':>7} {'MB/s':>7} {'RSS after imports':>18} {'peak RSS':>9}"
        )
        for mode in ("parse", "scan", "verbosity"):
            r = measure(mode, folder)
            rate = r["bytes"] / 1e6 / r["seconds"]
            print(
                f"{mode:<7} {r['bytes'] / 1e6:>6.0f} {r['seconds']:>7.2f} {rate:>7.1f} "
                f"{r['baseline_mb']:>15.0f} MB {r['peak_mb']:>6.0f} MB"
            )
            if mode == "scan":
                print(
                    f"        {r['sessions']} sessions, {r['loops']} loops, digest "
                    f"{r['digest_tokens']} tokens"
                )
            if mode == "verbosity":
                print(
                    f"        {r['sessions']} sessions, {r['answers']} answers in the "
                    f"baseline, {r['new_asks']} new asks"
                )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
