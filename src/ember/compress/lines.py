"""A long text output (a test run, a build, a log) shortened to the lines an agent acts on (pure).

Kept, each line byte for byte as it was:
- the first ``HEAD`` and last ``TAIL`` lines (a command's banner; its summary and exit),
- every line that signals trouble or a result — an error, a failure, a warning, an exception
  or traceback, an assertion, a summary count ("1 failed, 599 passed") — with ``CONTEXT``
  lines around it, and a failure report's whole block (pytest's ``____ test_x ____`` section,
  a ``Traceback``) up to ``BLOCK`` lines,
- every line that names something the conversation names (the user's ask, the call's own
  arguments: a test id, a file, an order number), with one line around it,
- in a log of repeated lines, each line of a shape seen only once (the one odd line among
  hundreds of alike ones: numbers, hashes and times do not make a shape).
The rest is left out; each run of left-out lines becomes one marker line naming how many and
the ``ref`` that brings them back (``ember_retrieve``, with the line range).

Deterministic: the same text and terms give the same bytes (they are replayed on every later
request of the session, and must never change the cached prefix).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ahocorasick  # type: ignore[import-not-found]

HEAD = 10
TAIL = 20
CONTEXT = 3
BLOCK = 60
#: A term on more than this share of the lines is not looked for.
COMMON_TERM = 0.02
#: At most this many odd-shaped lines are kept for being odd (more: the log is not repetitive).
MAX_ODD = 30

#: Words that signal trouble or a result (lower case; a word of its own: ``test_error_x``
#: is a name, not an error). Found with ``str.find`` and checked at their edges: a regex of
#: them over the lower-cased text took 0.8 ms on a 600-line log, the finds 0.2.
SIGNAL_WORDS = (
    "error", "errors", "errored", "failed", "failure", "failures", "fail", "fatal", "panic",
    "panicked", "exception", "traceback", "assert", "assertion", "assertionerror", "warning",
    "warnings", "warn", "critical", "denied", "refused", "not found", "cannot", "could not",
    "unable", "undefined", "segmentation fault", "timeout", "timed out", "killed", "abort",
    "aborted", "deprecated", "deprecationwarning", "exit code", "exit status",
)  # fmt: skip
#: Marks test runners print beside a failure (found anywhere, not as words).
CROSSES = ("✗", "✘", "×")
#: Lines that open a block worth keeping whole: a pytest failure section, a traceback.
_BLOCK_START = re.compile(
    r"^_{3,} .+ _{3,}$|^Traceback \(most recent call last\)|^={3,} (?:FAILURES|ERRORS) ={3,}"
    r"|^thread '.+' panicked|^--- FAIL:|^FAIL\b",
    re.MULTILINE,
)
#: A line's shape: the line without its digits (counts, times, ids do not make a shape).
_NO_DIGITS = str.maketrans("", "", "0123456789")


@dataclass(frozen=True)
class Kept:
    """What a shortening kept: the text to send, and how much it left out."""

    text: str
    lines: int  # lines of the original
    left_out: int  # of them, left out


def marker(ref: str, count: int, first: int, last: int) -> str:
    """The line that stands for a run of left-out lines (1-based, inclusive range)."""
    return (
        f"[ember: {count} line{'s' if count != 1 else ''} left out; "
        f"ember_retrieve ref={ref} lines={first}-{last}]"
    )


def shorten_lines(text: str, ref: str, terms: Sequence[str] = ()) -> Kept | None:
    """``text`` with only the lines worth acting on, or None when nothing would be left out."""
    lines = text.split("\n")
    n = len(lines)
    if n <= HEAD + TAIL + 2:
        return None
    keep = bytearray(n)  # 1: kept
    _mark(keep, range(min(HEAD, n)))
    _mark(keep, range(max(0, n - TAIL), n))
    _signals(text, lines, keep, terms)
    _odd(text, keep)
    if all(keep):
        return None
    out: list[str] = []
    left_out = 0
    i = 0
    while i < n:
        if keep[i]:
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        out.append(marker(ref, j - i, i + 1, j))
        left_out += j - i
        i = j
    return Kept("\n".join(out), n, left_out)


def _mark(keep: bytearray, indices: range) -> None:
    for i in indices:
        keep[i] = 1


def _signals(text: str, lines: list[str], keep: bytearray, terms: Sequence[str]) -> None:
    """Signal lines with their context, failure blocks whole, and the lines that name a term
    with one line around each (a term on more than ``COMMON_TERM`` of the lines names nothing
    in particular here). Everything is found in one pass (Aho-Corasick over the lower-cased
    text: a regex of the words took 0.8 ms on a 600-line log, a count per term 0.4 ms and the
    line-start regexes 0.7 ms on 50 KB; the one pass takes 0.3 for all of them)."""
    n = len(lines)
    low = text.lower()
    starts = _line_starts(lines if len(low) == len(text) else low.split("\n"))
    signal: set[int] = set()
    blocks: set[int] = set()
    named: dict[str, set[int]] = {}
    for at, kind, word in _found(low, terms):
        i = bisect.bisect_right(starts, at) - 1
        if kind == _TERM:
            named.setdefault(word, set()).add(i)
        elif kind == _BLOCK:
            blocks.add(i)
        elif kind != _MARKED or at == starts[i] or not low[starts[i] : at].strip():
            signal.add(i)
    for i in sorted(blocks):
        if _BLOCK_START.match(lines[i]):
            _mark(keep, range(max(0, i - 1), _block_end(lines, i)))
    for i in signal:
        _mark(keep, range(max(0, i - CONTEXT), min(n, i + CONTEXT + 1)))
    limit = max(3, COMMON_TERM * n)
    for hits in named.values():
        if len(hits) <= limit:
            for i in hits:
                _mark(keep, range(max(0, i - 1), min(n, i + 2)))


def _found(low: str, terms: Sequence[str]) -> list[tuple[int, int, str]]:
    """(where, kind, term) of each signal word standing as a word of its own, cross mark,
    line-start mark, block opening and term in ``low``."""
    automaton = _automaton(tuple(sorted({t.lower() for t in terms if len(t) >= 3})))
    out: list[tuple[int, int, str]] = []
    end = len(low)
    for last, (size, kind, word) in automaton.iter(low):
        at = last - size + 1
        after = last + 1
        if kind != _WORD or (
            (at == 0 or not _is_word(low[at - 1])) and (after == end or not _is_word(low[after]))
        ):
            out.append((at, kind, word))
    return out


_WORD, _ANYWHERE, _MARKED, _BLOCK, _TERM = range(5)
#: What a report marks at a line's start (pytest's ``E`` lines, stack frames), counted only
#: where nothing but blanks comes before it on its line.
MARKS = ("e  ", 'file "', "at ")
#: What a failure block opens with (the line is then matched whole against ``_BLOCK_START``).
BLOCK_OPENINGS = (
    "traceback (most recent",
    "_ ",
    " _",
    "= failures =",
    "= errors =",
    "panicked",
    "--- fail:",
    "fail",
)


@functools.lru_cache(maxsize=64)
def _automaton(terms: tuple[str, ...]) -> Any:
    """The signal words, marks, block openings and ``terms`` (the same terms for every output
    of an ask: built once, ~15 us)."""
    automaton = ahocorasick.Automaton()
    kinds = [
        *((w, _WORD) for w in SIGNAL_WORDS),
        *((w, _ANYWHERE) for w in CROSSES),
        *((w, _MARKED) for w in MARKS),
        *((w, _BLOCK) for w in BLOCK_OPENINGS),
        *((t, _TERM) for t in terms),
    ]
    for word, kind in kinds:
        if word not in automaton:  # the first kind a word has wins
            automaton.add_word(word, (len(word), kind, word))
    automaton.make_automaton()
    return automaton


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _line_starts(lines: list[str]) -> list[int]:
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line) + 1
    return out


def _block_end(lines: list[str], start: int) -> int:
    """Where a failure block that opens at ``start`` ends: the next section header, or
    ``BLOCK`` lines on."""
    limit = min(len(lines), start + BLOCK)
    for j in range(start + 1, limit):
        if _BLOCK_START.match(lines[j]) or lines[j].startswith("====="):
            return j + (1 if lines[j].startswith("=====") else 0)
    return limit


def _odd(text: str, keep: bytearray) -> None:
    """Lines of a shape seen once, in a log where most lines share a few shapes."""
    shapes = text.translate(_NO_DIGITS).split("\n")
    counts = Counter(shapes)
    common = sum(c for _, c in counts.most_common(5))
    if common < len(shapes) // 2:
        return  # not a repetitive log: every line is "odd"
    odd = [i for i, s in enumerate(shapes) if counts[s] == 1 and s.strip()]
    if len(odd) > MAX_ODD:
        return
    for i in odd:
        keep[i] = 1
