"""Loops: the one waste that grows with every repetition (pure functions, no I/O).

Two shapes. An *error loop* is the same call failing again and again (a wrong path read five
times): with the lesson known none of those calls should happen, so all of them are waste. A
*re-fetch loop* succeeds every time (``grep foo | head -50`` cut short, then ``head -100``,
then another ``offset``): the first call was honest work, the others are waste — and an
analysis that only looks at failures never sees it.

Variants fold into one *canonical signature*: pagination and limit fragments are stripped from
shell commands (``| head -50``, ``--limit 20``, ``sed -n '1,80p'``) and from other tools'
arguments (``offset``, ``limit`` ...), then every bare integer left becomes ``N``; so
``head -50`` and ``head -100`` are one loop. Loops are found per session (the same command in
two unrelated sessions is not a loop), from :data:`MIN_OCCURRENCES` calls on — three is the
smallest count that tells "once more" and "one retry after a failure" apart.

The waste is measured from the logs (what the calls sent and got back, in tokens), a lower
bound, and it *overrides* the model's guess for any recommendation whose text shares more than
half of a loop signature's words (:func:`apply_loop_weighting`): guardrails against loops then
outrank one-off rules without relying on the model to weigh them right.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ember.learn.model import Recommendation, SessionData, ToolCall

__all__ = [
    "MIN_OCCURRENCES",
    "Loop",
    "apply_loop_weighting",
    "call_tokens",
    "canonical_signature",
    "detect_loops",
]

MIN_OCCURRENCES = 3
#: Characters per token, the rough estimate used for measured waste and budgets.
CHARS_PER_TOKEN = 4

_PAGINATION = [
    re.compile(r"\|\s*(?:head|tail)(?:\s+-[nc])?(?:\s+-?\+?\d+)?"),
    re.compile(r"\bsed\s+-n\s+['\"]?\d+(?:,\d+)?p['\"]?"),
    re.compile(
        r"\s--?(?:limit|max-count|max-results|count|lines|offset|page|per-page|max-lines)"
        r"(?:[= ]\s*\d+)"
    ),
    re.compile(r"\s-[nmcABC]\s*\d+\b"),
    re.compile(r"\b(?:offset|limit|page|start|end)=\d+"),
    re.compile(r"\|\s*(?:less|more)\b"),
]
#: an integer standing alone (between spaces, quotes, ``=`` or commas): not a port or a name
_INTEGER = re.compile(r"(?<![^\s=,'\"(\[])-?\d+(?![^\s,'\")\]])")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"[a-z0-9_]{2,}")
_VOLATILE_KEYS = frozenset(
    {
        "offset",
        "limit",
        "head_limit",
        "page",
        "cursor",
        "start_line",
        "end_line",
        "max_results",
        "max_lines",
        "lines",
        "line",
        "count",
        "n",
        "-a",
        "-b",
        "-c",
        "description",
        "timeout",
    }
)
_SHELL_PREFIX = re.compile(r"^(?:/bin/)?(?:ba|z)?sh\s+-l?c\s+")


def shell_command(call: ToolCall) -> str | None:
    """The shell command a call ran, if it is a shell call (``command`` / ``cmd`` argument; a
    Codex argv list is joined and its ``bash -lc`` prefix dropped)."""
    raw = call.input.get("command", call.input.get("cmd"))
    if isinstance(raw, list):
        raw = " ".join(str(part) for part in raw)
    if not isinstance(raw, str):
        return None
    return _SHELL_PREFIX.sub("", raw.strip())


def canonical_signature(call: ToolCall) -> str:
    """The form shared by every variant of the same call (see the module docstring)."""
    command = shell_command(call)
    if command is not None:
        text = command
        for pattern in _PAGINATION:
            text = pattern.sub(" ", text)
    else:
        kept = {k: v for k, v in call.input.items() if k.lower() not in _VOLATILE_KEYS}
        text = " ".join(f"{k}={_flat(v)}" for k, v in sorted(kept.items()))
    text = _INTEGER.sub("N", text)
    return f"{call.name}: {_SPACES.sub(' ', text).strip()}"


def _flat(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def call_tokens(call: ToolCall) -> int:
    """What one call cost in context, measured: its arguments plus what it returned."""
    sent = sum(len(_flat(v)) for v in call.input.values())
    return max(1, (sent + call.output_chars) // CHARS_PER_TOKEN)


@dataclass(slots=True)
class Loop:
    """A signature repeated in one session, and what the repetition wasted."""

    session_id: str
    agent: str
    signature: str
    tool: str
    kind: str  # "error" | "refetch"
    occurrences: int
    errors: int
    wasted_tokens: int
    first_error: str | None = None
    examples: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "signature": self.signature,
            "kind": self.kind,
            "occurrences": self.occurrences,
            "errors": self.errors,
            "wasted_tokens": self.wasted_tokens,
            "first_error": self.first_error,
        }


def detect_loops(session: SessionData, min_occurrences: int = MIN_OCCURRENCES) -> list[Loop]:
    """The loops of one session, most wasteful first (ties by signature).

    A signature is an error loop when at least half of its calls failed: all its calls are
    waste. Otherwise it is a re-fetch loop: every call but the first is waste.
    """
    groups: dict[str, list[ToolCall]] = defaultdict(list)
    for call in session.tool_calls:
        groups[canonical_signature(call)].append(call)
    loops: list[Loop] = []
    for signature, calls in groups.items():
        if len(calls) < min_occurrences:
            continue
        failed = [c for c in calls if c.is_error]
        is_error = 2 * len(failed) >= len(calls)
        wasted = calls if is_error else calls[1:]
        examples = list(dict.fromkeys(_example(c) for c in calls))[:3]
        loops.append(
            Loop(
                session.session_id,
                session.agent,
                signature,
                calls[0].name,
                "error" if is_error else "refetch",
                len(calls),
                len(failed),
                sum(call_tokens(c) for c in wasted),
                failed[0].error if failed else None,
                examples,
            )
        )
    loops.sort(key=lambda loop: (-loop.wasted_tokens, loop.signature))
    return loops


def _example(call: ToolCall) -> str:
    command = shell_command(call)
    if command is not None:
        return command[:200]
    return " ".join(f"{k}={_flat(v)[:120]}" for k, v in sorted(call.input.items()))[:200]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - {"n"}


def apply_loop_weighting(
    recommendations: Sequence[Recommendation], loops: Iterable[Loop]
) -> list[Recommendation]:
    """Recommendations with measured waste put in place of the model's estimate.

    A recommendation overlaps a signature when more than half of the signature's words occur
    in its text; it then carries the waste measured for that signature (summed over the
    sessions where it looped; the largest when several overlap) and ``is_loop_guardrail``.
    The result is ranked by weight, heaviest first (stable for equal weights).
    """
    waste: dict[str, int] = defaultdict(int)
    where: dict[str, list[str]] = defaultdict(list)
    for loop in loops:
        waste[loop.signature] += loop.wasted_tokens
        where[loop.signature].append(
            f"{loop.agent} session {loop.session_id}: {loop.signature} x{loop.occurrences}"
        )
    signature_words = {sig: _words(sig) for sig in waste}
    out: list[Recommendation] = []
    for rec in recommendations:
        words = _words(rec.text)
        best: str | None = None
        for sig, sig_words in signature_words.items():
            overlaps = bool(sig_words) and 2 * len(sig_words & words) > len(sig_words)
            if overlaps and (best is None or waste[sig] > waste[best]):
                best = sig
        if best is not None:
            evidence = [*rec.evidence, *(e for e in where[best] if e not in rec.evidence)]
            rec = Recommendation(rec.section, rec.text, waste[best], True, evidence)
        out.append(rec)
    out.sort(key=lambda r: -r.weight)
    return out
