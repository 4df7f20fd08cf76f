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
#: The words of a count in a summary ("1 failed, 599 passed"): a signal after a number.
COUNT_WORDS = (
    "passed", "failed", "error", "errors", "skipped", "warning", "warnings", "test", "tests",
    "xfailed", "xpassed",
)  # fmt: skip
#: Lines a report marks by their start: pytest's ``E`` lines, stack frames.
_MARKED = re.compile(r"^(?:E {2,}|\s*at \S+\(|\s*File \")", re.MULTILINE)
#: Lines that open a block worth keeping whole: a pytest failure section, a traceback.
_BLOCK_START = re.compile(
    r"^_{3,} .+ _{3,}$|^Traceback \(most recent call last\)|^={3,} (?:FAILURES|ERRORS) ={3,}"
    r"|^thread '.+' panicked|^--- FAIL:|^FAIL\b",
    re.MULTILINE,
)
_DIGITS = re.compile(r"#+")
_TO_HASH = str.maketrans("0123456789", "##########")


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
    _signals(text, lines, keep)
    _named(text, lines, keep, terms)
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


def _signals(text: str, lines: list[str], keep: bytearray) -> None:
    """Signal lines with their context, and failure blocks whole. The words are found in one
    pass (Aho-Corasick over the lower-cased text: a regex of them took 0.8 ms on a 600-line
    log, a ``find`` per word 0.6, the one pass 0.2)."""
    n = len(lines)
    starts = _line_starts(lines)
    for m in _BLOCK_START.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        _mark(keep, range(max(0, i - 1), _block_end(lines, i)))
    low = text.lower()
    low_starts = starts if len(low) == len(text) else _line_starts(low.split("\n"))
    at = [m.start() for m in _MARKED.finditer(text)]
    found = {bisect.bisect_right(starts, a) - 1 for a in at}
    found |= {bisect.bisect_right(low_starts, a) - 1 for a in _signal_words(low)}
    for i in sorted(found):
        _mark(keep, range(max(0, i - CONTEXT), min(n, i + CONTEXT + 1)))


def _signal_words(low: str) -> list[int]:
    """Where a signal word stands as a word of its own, a count's word follows a number, or
    a cross mark stands anywhere, in ``low``."""
    out = []
    end = len(low)
    for last, (size, kind) in _automaton().iter(low):
        at = last - size + 1
        after = last + 1
        if kind == _ANYWHERE:
            out.append(at)
        elif kind == _COUNTED:
            if at > 0 and low[at - 1].isdigit() and (after == end or not _is_word(low[after])):
                out.append(at)
        elif (at == 0 or not _is_word(low[at - 1])) and (after == end or not _is_word(low[after])):
            out.append(at)
    return out


_WORD, _COUNTED, _ANYWHERE = 0, 1, 2


@functools.cache
def _automaton() -> Any:
    automaton = ahocorasick.Automaton()
    for word in SIGNAL_WORDS:
        automaton.add_word(word, (len(word), _WORD))
    for word in COUNT_WORDS:
        automaton.add_word(" " + word, (len(word) + 1, _COUNTED))
    for mark in CROSSES:
        automaton.add_word(mark, (len(mark), _ANYWHERE))
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


def _named(text: str, lines: list[str], keep: bytearray, terms: Sequence[str]) -> None:
    """Lines that name a term, and one line around each; a term on more than
    ``COMMON_TERM`` of the lines names nothing in particular here and is passed over."""
    n = len(lines)
    low = text.lower()
    starts = _line_starts(lines)
    for term in sorted({t.lower() for t in terms if len(t) >= 3}):
        hits = sorted({bisect.bisect_right(starts, m.start()) - 1 for m in _finditer(term, low)})
        if len(hits) > max(3, COMMON_TERM * n):
            continue
        for i in hits:
            _mark(keep, range(max(0, i - 1), min(n, i + 2)))


def _finditer(term: str, text: str) -> list[re.Match[str]]:
    return list(re.finditer(re.escape(term), text))


def _odd(text: str, keep: bytearray) -> None:
    """Lines of a shape seen once, in a log where most lines share a few shapes."""
    shapes = [line.strip() for line in _DIGITS.sub("#", text.translate(_TO_HASH)).split("\n")]
    counts = Counter(shapes)
    common = sum(c for _, c in counts.most_common(5))
    if common < len(shapes) // 2:
        return  # not a repetitive log: every line is "odd"
    odd = [i for i, s in enumerate(shapes) if counts[s] == 1 and s]
    if len(odd) > MAX_ODD:
        return
    for i in odd:
        keep[i] = 1
