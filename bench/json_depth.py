"""What the JSON nesting limit costs on the request path, next to parsing without it.

Every request body ember handles is parsed once. With ``max_json_depth`` the parse runs inside
``1024 - max_depth`` wrapper lists so that orjson's own depth limit does the check
(``ember.protocols.jsonedit``). This script measures that against the plain parse and against
the two checks it replaced on paper: a vectorised numpy scan of the bracket bytes outside
strings, and a walk of the parsed value. Bodies are agent-like, 24 KiB to 2 MiB, of three
kinds: ``code`` (tool results holding source files: long strings, many brackets and escaped
quotes inside them), ``chat`` (many text turns) and ``tools`` (many small structured tool calls).

    python bench/json_depth.py [--repeat 41] [--limit 256]

Times are medians over ``--repeat`` runs, in ms, with the garbage collector paused (a collection
landing in one run swamps the rest); the plain and the checked parse run alternately and
"added" is the median of their per-pair difference; "x parse" is a cost as a share of the
plain parse.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ember.protocols.jsonedit import JsonDoc, nesting_exceeds

SIZES_KB = (24, 100, 500, 2048)
_SOURCES = sorted((Path(__file__).parent.parent / "src" / "ember").rglob("*.py"))

_OPENS = np.zeros(256, np.int8)
_OPENS[[ord("["), ord("{")]] = 1
_OPENS[[ord("]"), ord("}")]] = -1


def numpy_depth(raw: bytes) -> int:
    """Nesting depth from the bracket bytes outside strings (a quote counts unless an odd run
    of backslashes precedes it). The scan the wrapped parse was chosen over."""
    a = np.frombuffer(raw, np.uint8)
    quotes = np.flatnonzero(a == 0x22)
    after_bs = quotes[quotes > 0]
    after_bs = after_bs[a[after_bs - 1] == 0x5C]
    if after_bs.size:
        bs = np.flatnonzero(a == 0x5C)
        starts = np.ones(bs.size, bool)
        starts[1:] = np.diff(bs) != 1
        run_start = bs[np.maximum.accumulate(np.where(starts, np.arange(bs.size), 0))]
        runs = after_bs - run_start[np.searchsorted(bs, after_bs - 1)]
        quotes = np.setdiff1d(quotes, after_bs[(runs & 1) == 1], assume_unique=True)
    folded = a | 0x20
    brackets = np.flatnonzero((folded == 0x7B) | (folded == 0x7D))
    outside = brackets[(np.searchsorted(quotes, brackets) & 1) == 0]
    steps = _OPENS[a[outside]]
    return int(np.cumsum(steps, dtype=np.int32).max()) if steps.size else 0


def _grow(kb: int, turn: Callable[[int], list[dict[str, Any]]]) -> bytes:
    messages: list[dict[str, Any]] = []
    size = 0
    i = 0
    while size < kb * 1024:
        new = turn(i)
        messages += new
        size += len(json.dumps(new))
        i += 1
    tools = [
        {
            "name": f"tool_{n}",
            "input_schema": {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"path": {"type": "string"}}},
                    }
                },
            },
        }
        for n in range(20)
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": tools, "messages": messages}
    return json.dumps(body).encode()


def code_turn(i: int) -> list[dict[str, Any]]:
    path = _SOURCES[i % len(_SOURCES)]
    read = {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"path": str(path.name)}}
    text = path.read_text(encoding="utf-8")
    result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
    return [{"role": "assistant", "content": [read]}, {"role": "user", "content": [result]}]


def chat_turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"step {i} " + "x" * 400}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok " * 60}]},
    ]


def tools_turn(i: int) -> list[dict[str, Any]]:
    edit = {"path": f"src/m{i}.py", "edits": [{"old": "a", "new": "b"}, {"old": "c", "new": "d"}]}
    call = {"type": "tool_use", "id": f"t{i}", "name": "Edit", "input": edit}
    ok = [{"type": "text", "text": "ok"}]
    done = {"type": "tool_result", "tool_use_id": f"t{i}", "content": ok}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [done]}]


def _once(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def paired_ms(
    base: Callable[[], object], other: Callable[[], object], repeat: int
) -> tuple[float, float, float]:
    """Medians of ``base`` and ``other`` run alternately, and the median of their per-pair
    difference (drift on a shared machine hits both halves of a pair alike)."""
    base(), other()
    pairs = [(_once(base), _once(other)) for _ in range(repeat)]
    ms = [statistics.median(col) / 1e6 for col in zip(*pairs, strict=True)]
    return ms[0], ms[1], statistics.median(b - a for a, b in pairs) / 1e6


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    return statistics.median(_once(fn) for _ in range(repeat)) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=41)
    ap.add_argument("--limit", type=int, default=256)
    args = ap.parse_args()
    limit, repeat = args.limit, args.repeat

    print(f"JSON nesting check, max_json_depth={limit}: median of {repeat} runs, ms")
    header = (
        f"{'body':<14}{'bytes':>10}{'no check':>10}{'wrapped':>10}{'added':>8}"
        f"{'x parse':>9}{'numpy':>10}{'x parse':>9}{'walk':>10}{'x parse':>9}"
    )
    print(header)
    worst = 0.0
    for kind, turn in (("code", code_turn), ("chat", chat_turn), ("tools", tools_turn)):
        for kb in SIZES_KB:
            raw = _grow(kb, turn)
            value = orjson.loads(raw)
            depth = next(d for d in range(limit + 1) if not nesting_exceeds(value, d))
            assert numpy_depth(raw) == depth, (numpy_depth(raw), depth)
            gc.collect()
            gc.disable()  # a collection landing in one run would swamp what is measured
            try:
                plain, wrapped, added = paired_ms(
                    lambda: JsonDoc(raw),  # noqa: B023
                    lambda: JsonDoc(raw, max_depth=limit),  # noqa: B023
                    repeat,
                )
                scan = median_ms(lambda: numpy_depth(raw), repeat)  # noqa: B023
                walk = median_ms(lambda: nesting_exceeds(value, limit), repeat)  # noqa: B023
            finally:
                gc.enable()
            worst = max(worst, added)
            print(
                f"{kind + ' ' + str(kb) + 'K':<14}{len(raw):>10}{plain:>10.3f}{wrapped:>10.3f}"
                f"{added:>8.3f}{added / plain:>9.2f}{scan:>10.3f}{scan / plain:>9.2f}"
                f"{walk:>10.3f}{walk / plain:>9.2f}"
            )
    print(
        "no check = JsonDoc(raw), the parse as before; wrapped = JsonDoc(raw, max_depth), the "
        "parse with the check;\nnumpy = the byte scan alone, walk = a walk of the parsed value "
        "alone (either would come on top of the parse)."
    )
    print(f"largest added cost of the wrapped check: {worst:.3f} ms")


if __name__ == "__main__":
    main()
